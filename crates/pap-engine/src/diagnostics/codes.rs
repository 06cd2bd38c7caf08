//! The stable diagnostic codes. Renaming one breaks users' CI filters: add, never rename.

use super::Severity;

pub struct CodeInfo {
    pub code: &'static str,
    pub severity: Severity,
    pub summary: &'static str,
}

const fn error(code: &'static str, summary: &'static str) -> CodeInfo {
    CodeInfo {
        code,
        severity: Severity::Error,
        summary,
    }
}

const fn warning(code: &'static str, summary: &'static str) -> CodeInfo {
    CodeInfo {
        code,
        severity: Severity::Warning,
        summary,
    }
}

/// Every code lint can emit, in the order docs/src/reference/cli/lint.md documents them.
pub const CODES: &[CodeInfo] = &[
    // Reading the file.
    error(
        "unreadable-file",
        "the file could not be read (permissions, not UTF-8)",
    ),
    error("yaml-syntax", "the file is not valid YAML"),
    error("duplicate-key", "a mapping has the same key twice"),
    error(
        "unknown-manifest-kind",
        "a file is neither a trigger, an agent nor pap.yaml",
    ),
    // Shape, checked against the JSON Schema that `pap schema` prints.
    error(
        "wrong-type",
        "a value has the wrong type (string where a list belongs, ...)",
    ),
    error(
        "unknown-field",
        "a field PAP 0.2 and pap's extensions do not define",
    ),
    error("missing-field", "a required field is absent"),
    error("pap-version", "`pap_version` is not the string \"0.2\""),
    error(
        "unknown-operator",
        "a filter operator that PAP 0.2 does not define",
    ),
    error(
        "unknown-risk-level",
        "a risk level other than read_only, low, medium, high",
    ),
    error(
        "unknown-provider",
        "a model provider other than anthropic, openai, command",
    ),
    error(
        "unknown-output-type",
        "an output type other than structured, text",
    ),
    error(
        "unknown-impact",
        "a tool impact other than internal, external",
    ),
    error(
        "invalid-schema-type",
        "an output schema type outside string, number, integer, boolean, array, object",
    ),
    error("invalid-value", "a value outside the allowed set"),
    error("out-of-range", "a number outside its allowed range"),
    error(
        "throttle-range",
        "`max_per_window` below 1, `window_seconds` outside 1 to a year, or a `throttle` list with no window",
    ),
    error(
        "debounce-range",
        "`debounce.seconds` outside 1 to 31536000 (a year)",
    ),
    error(
        "budget-needs-turn-limit",
        "an LLM agent's token or money budget with no bound on a run (`limits.max_tool_calls`, openai's `model.max_tokens`), or less than one run reserves",
    ),
    error(
        "budget-currency",
        "`usd_per_day` where pap.yaml's prices are in another currency",
    ),
    warning(
        "unpriced-model",
        "an agent with a money budget whose model has no price in pap.yaml",
    ),
    error("retry-attempts-range", "`retry.max_attempts` outside 1..10"),
    // Meaning, checked by the compile step that dispatch and serve share.
    error(
        "invalid-id",
        "an id that is empty or has spaces or characters outside [A-Za-z0-9._-]",
    ),
    error(
        "invalid-event-type",
        "an event type that is not dot notation with at least three segments",
    ),
    error(
        "wildcard-in-segment",
        "`*` used inside a segment of `match.type` instead of as a whole segment",
    ),
    warning(
        "change-not-crossing",
        "an event type condition that describes a change, not a threshold crossing",
    ),
    error(
        "invalid-jsonpath",
        "a filter `path` that is not valid RFC 9535 JSONPath",
    ),
    error("missing-value", "an operator that needs a `value` has none"),
    error(
        "value-type-mismatch",
        "a `value` that does not fit its operator",
    ),
    error(
        "invalid-regex",
        "a `regex` pattern that does not compile (or exceeds the size limit)",
    ),
    warning(
        "numeric-string",
        "a quoted value that looks like a number, which never equals a number",
    ),
    error(
        "invalid-window-key",
        "a throttle `window_key` that is not valid JSONPath",
    ),
    error(
        "invalid-tool-source",
        "a tool `source` that is not `mcp://NAME`",
    ),
    error(
        "unknown-mcp-server",
        "a tool source naming a server that pap.yaml does not define",
    ),
    error("duplicate-tool", "an agent lists the same tool twice"),
    error(
        "unknown-tool-notification",
        "a tool's `notifications:` switch naming a notification the tool does not emit",
    ),
    warning(
        "internal-tool-risk",
        "`impact: internal` on a tool whose risk makes it external anyway",
    ),
    error(
        "missing-command",
        "a `command` provider without a non-empty `model.command`",
    ),
    error(
        "missing-model-id",
        "an LLM provider without `model.model_id`",
    ),
    warning(
        "unused-field",
        "a field that has no effect with the chosen provider or output type",
    ),
    error("invalid-url", "a URL that is not http:// or https://"),
    error(
        "invalid-env-name",
        "an environment variable name outside [A-Za-z_][A-Za-z0-9_]*",
    ),
    error(
        "invalid-interpolation",
        "a `$` in an MCP env or header value, a sink URL or header, or a command agent's `model.env`, that is not `${NAME}` or `$$`",
    ),
    warning(
        "command-not-found",
        "a `model.command` program path that does not exist or is not executable; an MCP server's `command` that is not on PATH (or, as a path, does not exist)",
    ),
    error(
        "invalid-emit-type",
        "an `emit_event` or `emits` type that is not valid dot notation",
    ),
    error(
        "reserved-event-type",
        "an agent or schedule declares a `pap.` event type, which only the dispatcher may emit",
    ),
    error(
        "invalid-cron",
        "a schedule's `cron` that is not a 5-field cron expression, or never fires",
    ),
    error(
        "invalid-timezone",
        "a schedule's `timezone` that is not an IANA time zone name",
    ),
    error(
        "invalid-duration",
        "a duration that is not like `90s`, `30m`, `24h`, `7d` or `1h30m`",
    ),
    error(
        "invalid-size",
        "a size that is not like `64MiB` or `1GiB`, or is out of its range",
    ),
    error(
        "invalid-price",
        "a `prices:` rate that is not a number of 0 or more, or a currency that is not an ISO 4217 code",
    ),
    error("idempotency-ttl", "an idempotency TTL below 24 hours"),
    error(
        "store-url",
        "a `store:` URL that is not a usable PostgreSQL URL, or that carries a password",
    ),
    error(
        "mcp-server-transport",
        "an MCP server with neither or both of `command` and `url`",
    ),
    error(
        "notify-routing",
        "a `notify` route that cannot be delivered: an agent side without `agent`, a session without its name, an approval request away from the human",
    ),
    error(
        "invalid-template",
        "a `notify` content, session or deduplication key with an unknown `{placeholder}` or unbalanced braces",
    ),
    error(
        "invalid-sink",
        "a notification sink without what its type needs (url, command, path), or with a duplicate or invalid name",
    ),
    // Across files.
    error(
        "duplicate-id",
        "two triggers, two agents or two schedules share an id, or two rule test cases of a file a name",
    ),
    warning(
        "jsonpath-cost",
        "a JSONPath whose cost can grow much faster than the event (nested descendant segments)",
    ),
    warning(
        "throttle-window-unreachable",
        "a throttle window that never refuses anything: a shorter window with the same key already admits fewer in its time",
    ),
    warning(
        "trigger-id-suffix",
        "a trigger id that ends with another trigger's id, so PAP idempotency keys of different pairs coincide",
    ),
    warning(
        "schedule-unmatched",
        "a schedule whose event type no enabled trigger matches",
    ),
    // pap.yaml `listen:` (serve's HTTP listener).
    error(
        "invalid-listen-address",
        "a listen address or allowed host that is not HOST:PORT (or HOST)",
    ),
    error(
        "plain-secret",
        "a token written into pap.yaml instead of `${NAME}` from the environment or a `token_file`",
    ),
    error(
        "invalid-password-hash",
        "a `password_hash` that is not an argon2 hash in PHC form",
    ),
    error(
        "principal-credential",
        "a principal with more than one, or none, of `token`, `token_file`, `password_hash` and `password_hash_file`",
    ),
    error("duplicate-principal", "two principals with the same name"),
    error(
        "invalid-adapter-path",
        "a webhook adapter's route that is not under /v1/ingest/, or that another adapter has",
    ),
    error(
        "batch-with-debounce",
        "a trigger with both `debounce` and `batch` (each keeps the burst's one pending invocation)",
    ),
    error(
        "cancel-key-unknown",
        "a trigger's `cancel_on.match` names a field the events an adapter makes for its `match.type` or `cancel_on.type` never have",
    ),
    warning(
        "cancel-key-unchecked",
        "a trigger's `cancel_on.match` could not be checked: no adapter makes events of its `match.type` or `cancel_on.type`",
    ),
    error(
        "invalid-annotation",
        "an empty name, or one with control characters, in an adapter's `identity_annotations`",
    ),
    error(
        "anonymous-approve",
        "`approve` among the anonymous scopes (an approval names a person)",
    ),
    // Rule test files (`pap test`, rule-tests/).
    error(
        "unknown-trigger",
        "a rule test expects an outcome of a trigger that no trigger manifest defines",
    ),
    error(
        "rule-test-event",
        "a rule test step whose event is missing, doubled (`event` and `file`), unreadable or not a valid event",
    ),
    error(
        "invalid-timestamp",
        "a time that is not RFC 3339 (`2026-03-11T06:00:00Z`)",
    ),
    error(
        "unknown-agent",
        "a trigger's `agent`, or a `notify` route's `agent`, that no agent manifest defines",
    ),
    warning(
        "cascade-cycle",
        "agents whose emitted events provoke each other in a loop",
    ),
    warning("no-manifests", "no manifest files were found"),
];

pub fn code_info(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|c| c.code == code)
}
