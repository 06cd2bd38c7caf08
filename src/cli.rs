//! Command-line definitions (clap derive). No logic lives here.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// `pap --version`; a test build (the `test-clock` feature) says so, since it lets
/// `PAP_NOW` move its clock and must never be deployed.
pub const VERSION: &str = if cfg!(feature = "test-clock") {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (test build: PAP_NOW moves the clock)"
    )
} else {
    env!("CARGO_PKG_VERSION")
};

#[derive(Debug, Parser)]
#[command(
    name = "pap",
    version = VERSION,
    about = "Dispatcher for the Provoke the Agent Protocol (PAP 0.2): events in, agents provoked",
    long_about = "Dispatcher for the Provoke the Agent Protocol (PAP 0.2).\n\n\
        Monitoring systems emit PAP events; trigger manifests (triggers/*.yaml) decide which \
        agent (agents/*.yaml) is provoked, under filters, idempotency, cascade control, \
        throttling and risk rules.",
    after_help = "Exit codes: 0 success; 1 failure (lint errors, an unreadable file, an unusable store); \
        2 usage error; 3 an event was invalid; 4 an agent run failed after its retries (3 wins over 4); \
        5 `pap status` found something that needs a person.\n\n\
        Examples:\n  pap dispatch examples/events/server-latency-sla-breach.json\n  \
        monitor | pap dispatch - --json\n  pap invocations --status awaiting_approval\n  \
        pap lint --format github --strict"
)]
pub struct Cli {
    /// Project root holding pap.yaml, triggers/ and agents/. Default: the nearest directory,
    /// from the current one upward, with a pap.yaml (or both triggers/ and agents/).
    #[arg(long, global = true, env = "PAP_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// State directory (store, spool). Default: <root>/.pap, or `state_dir` from pap.yaml.
    #[arg(long, global = true, env = "PAP_STATE", value_name = "DIR")]
    pub state: Option<PathBuf>,

    /// When to colour human output: auto (a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t)]
    pub color: crate::term::ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The project root: `--root` (or `PAP_ROOT`), else the one found upward from the current
    /// directory (`cmd::run` fills it in), else the current directory.
    pub fn root(&self) -> &std::path::Path {
        self.root
            .as_deref()
            .unwrap_or_else(|| std::path::Path::new("."))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every manifest (triggers, agents, pap.yaml) without touching the state store.
    #[command(
        after_help = "Exit status: 0 no errors (warnings allowed unless --strict), 1 errors, 2 usage error.\n\n\
        Examples:\n  pap lint                              # the whole project under --root\n  \
        pap lint triggers/energy.yaml         # one file, checked against the rest of the project\n  \
        pap lint --format json | jq .errors\n  \
        pap lint --format github --strict     # annotations in a GitHub Actions job"
    )]
    Lint(LintArgs),

    /// Run rule tests: events at simulated times, and the outcome each trigger should decide.
    #[command(
        after_help = "A rule test file (default: every *.yaml under rule-tests/) lists cases; each case \
        decides its events in order on a fresh, throwaway state, each at `start` plus its `at`, and \
        checks the outcome expected per trigger (invoked, filtered, duplicate, cascade_rejected, \
        debounced, batched, throttled, budget_exceeded, awaiting_approval, disabled, unmatched) and optionally a substring of the reason. \
        A step may be `webhook: {adapter: alertmanager, file: body.json}` (or `body:` inline): \
        the body is mapped as serve maps a post of it, and each event it makes is decided and \
        held to the step's expectations. \
        Agents are not run unless a case sets `run: true` (then `result: succeeded|failed` can be checked); a \
        step with `fired:` checks what trailing debounces made. Nothing is written to the project's state.\n\n\
        cases:\n  - name: a second spike within the hour is throttled\n    start: 2026-03-11T06:00:00Z\n    \
        events:\n      - file: ../examples/events/energy-price-spike.json\n        expect: {energy-price-spike: invoked}\n      \
        - at: +90s\n        event: {type: energy.price.threshold_exceeded, data: {region: NO1, price_nok_per_kwh: 4.1}}\n        \
        expect:\n          energy-price-spike: {outcome: throttled, reason: \"1 of 1\"}\n\n\
        Exit status: 0 every case passed; 1 a case failed, a test file has errors, the project does \
        not load, or there are no tests; 2 usage error.\n\n\
        Examples:\n  pap test\n  pap test rule-tests/energy.yaml --coverage\n  \
        pap test --format junit > rule-tests.xml\n  \
        pap test --format github          # annotations on the failing lines in a GitHub Actions job"
    )]
    Test(TestArgs),

    /// Print the JSON Schema of a manifest kind, for editors (yaml-language-server).
    #[command(
        after_help = "Examples:\n  pap schema trigger > schemas/trigger.schema.json\n  \
        pap schema --out schemas            # writes trigger, agent and config schemas\n\n\
        Then start a manifest with:\n  # yaml-language-server: $schema=../schemas/trigger.schema.json"
    )]
    Schema(SchemaArgs),

    /// Decide events: for each matching trigger run filter, idempotency, cascade, throttle and
    /// risk, then run the agent.
    #[command(
        after_help = "Input: files or `-` (stdin), each holding one JSON object, a JSON array of objects, \
        or NDJSON (one event per line); PAP 0.2 events or CloudEvents 1.0 structured events. \
        With --adapter NAME, each file is one webhook body (Alertmanager's, Grafana's, or that of \
        an adapter in pap.yaml), mapped as serve maps a post to /v1/ingest/NAME.\n\n\
        Exit status: 0 every event valid and every agent run succeeded (filtered, duplicate, throttled, \
        paused and queued are successes); 3 some event was invalid; 4 some agent run failed after its \
        retries (3 wins over 4); 1 the store or a file could not be used; 2 usage error; 130 / 143 \
        stopped by SIGINT / SIGTERM (wins over the others).\n\n\
        Signals: SIGINT/SIGTERM stop taking events and starting agents; running agents get the grace \
        period (--grace), then are killed with their process groups and left queued for `pap serve`; \
        the lines of events already decided are printed. A second signal ends the grace period.\n\n\
        Examples:\n  pap dispatch examples/events/energy-price-spike.json\n  \
        pap dispatch events.ndjson --json | jq -c 'select(.status != \"dispatched\")'\n  \
        pap dispatch event.json --dry-run --explain     # test rules: what would happen, and why\n  \
        pap dispatch event.json --dry-run --at 2026-03-11T06:00:00Z --explain   # ... at another moment\n  \
        pap dispatch --adapter alertmanager alert.json --dry-run --explain   # a webhook body\n  \
        tail -F alerts.ndjson | pap dispatch - --no-run  # record only; `pap serve` runs them"
    )]
    Dispatch(DispatchArgs),

    /// Print the PAP events a webhook body would make: what a post of it to
    /// /v1/ingest/NAME makes, without serve.
    #[command(
        after_help = adapt_help()
    )]
    Adapt(AdaptArgs),

    /// List invocations, show one, retry one that failed, or cancel unfinished ones.
    #[command(
        after_help = "Examples:\n  pap invocations\n  pap invocations --status awaiting_approval\n  \
        pap invocations --json | jq -r 'select(.status == \"failed\") | .id'\n  \
        pap invocations --json --limit 500 --after AWkAAAAAAAAAHw   # the next 500 after a row's cursor\n  \
        pap invocations show 3e0313                    # a short id, as listings show it\n  \
        pap invocations retry 3e0313 --by alice\n  \
        pap invocations cancel --trigger energy-price-spike"
    )]
    Invocations(InvocationsArgs),

    /// Approve an invocation awaiting approval, and run it.
    #[command(
        after_help = "Exit status: 0 the approved run succeeded, 4 it failed after its retries, \
        1 the invocation is not awaiting approval (unknown, already decided, or expired).\n\n\
        Example:\n  pap approve inv_0123456789abcdef01234567 --by alice --note \"checked the price list\""
    )]
    Approve(ApproveArgs),

    /// Reject an invocation awaiting approval; it ends in its failure event.
    #[command(
        after_help = "Example:\n  pap reject inv_0123456789abcdef01234567 --reason \"price change too large\" --by alice"
    )]
    Reject(RejectArgs),

    /// Show the append-only audit log: medium and high risk invocations, and every operator
    /// action (retry, cancel) at any risk level.
    #[command(after_help = "Examples:\n  pap audit\n  pap audit --json --limit 100")]
    Audit(AuditArgs),

    /// Run the daemon: claim event files from the spool, run queued invocations and retries,
    /// expire approvals, fire cron schedules, purge old state.
    #[command(
        after_help = "Spool: write an event file under a temporary name (starting with `.` or ending in \
        `.tmp`), then rename it to `*.json` or `*.ndjson` in <state>/spool (or `spool_dir`). Each file \
        is decided, then moved to spool/done/ (or spool/failed/ beside a `.error.json` naming each bad \
        line, while its good lines are still dispatched).\n\n\
        While serve runs, every other command keeps working on the same state; `pap approve` hands \
        the run to serve. A second serve on the same state refuses to start.\n\n\
        Signals: SIGINT/SIGTERM stop claiming, let running agents finish within the grace period, \
        leave the rest queued and exit 0. SIGHUP reloads the manifests (also reloaded when they \
        change on disk); an invalid set is logged and the old one keeps running.\n\n\
        HTTP (--listen or listen.address): events are posted to /v1/events and answered once \
        decided and durable, with one `pap dispatch --json` line per event; see the book's HTTP \
        API for routes, content types, status codes and `listen.auth`.\n\n\
        Exit status: 0 clean stop (or --once done); 1 could not start (another serve runs, the \
        project has errors, the store is unusable, the listen address is taken or refused); 2 \
        usage (--once with --listen).\n\n\
        Examples:\n  pap serve\n  pap serve --max-concurrent 8 --log-format json 2>> serve.log\n  \
        pap serve --once          # drain the spool and the due work, fire due schedules, exit\n  \
        pap serve --listen 127.0.0.1:8080\n  \
        curl -H 'content-type: application/json' --data @alert.json http://127.0.0.1:8080/v1/events\n  \
        mv /tmp/.alert.json .pap/spool/alert.json   # hand an event to a running serve"
    )]
    Serve(ServeArgs),

    /// Cron schedules: list them, or show the next fire times of one.
    #[command(
        subcommand,
        after_help = "Examples:\n  pap schedule list\n  pap schedule next nightly-report -n 5"
    )]
    Schedule(ScheduleCommand),

    /// The state store: verify it, copy it consistently while others use it, or migrate a
    /// PostgreSQL schema.
    #[command(
        subcommand,
        after_help = "Examples:\n  pap store check\n  pap store backup /backups/pap-$(date +%F).redb\n  pap store migrate"
    )]
    Store(StoreCommand),

    /// The human inbox: notifications of outcomes and approval requests, oldest first.
    #[command(
        after_help = "Messages are append-only with strictly increasing ids; `--after ID` lists those \
        strictly after ID (a watermark you keep: reading never moves anything). `status` is the \
        notification's ANP status: dispatched until you acknowledge it, then delivered.\n\n\
        Examples:\n  pap inbox\n  pap inbox --after 41 --json | jq -r .content\n  \
        pap inbox watch                 # follow new messages\n  \
        pap inbox ack 42 43             # seen: DELIVERED\n  \
        pap inbox session open incident-db1"
    )]
    Inbox(InboxArgs),

    /// Answer an approval request with an ATP response message (a file, or `-` for stdin).
    #[command(
        after_help = "The response names the request by the ATP `id` shown in `pap inbox --json` \
        (`.atp.id`), and picks `approve` or `reject`:\n  \
        {\"notification_id\": \"…\", \"action_id\": \"approve\", \"response_data\": null,\n   \
        \"responded_at\": \"2026-11-21T10:35:12Z\", \"responder\": {\"id\": \"alice\", \"type\": \"human\"}}\n\n\
        Refused (exit 1): a responder that is not human, an unknown action, non-null response_data, \
        a request already answered or past its deadline (on pap's clock).\n\n\
        Exit status: as `pap approve` (0 the approved run succeeded or handed to serve, 4 it failed) \
        and `pap reject` (0); 1 refused or unreadable.\n\n\
        Example:\n  pap respond answer.json"
    )]
    Respond(RespondArgs),

    /// Check what would stop the first real page: provider keys, programs, MCP servers and
    /// their tools, sinks, the state dir.
    #[command(
        after_help = "One line per check (ok, warn, FAIL). MCP servers are started and asked for \
        their tools, each within --timeout; a webhook sink's host is resolved (its URL is never \
        printed: it may hold a secret).\n\n\
        Exit status: 0 no problem (warnings allowed); 1 some check failed.\n\n\
        Examples:\n  pap doctor\n  pap doctor --json | jq -r 'select(.status == \"fail\") | .check'"
    )]
    Doctor(DoctorArgs),

    /// Serve the chat inbox over MCP on stdin/stdout, for a local MCP client (a desktop app,
    /// an IDE, an agent).
    #[command(
        after_help = "The client starts `pap mcp` and speaks MCP (JSON-RPC) on its stdin and stdout; \
        logs go to stderr (PAP_LOG=debug for more). The server acts as the local user: `--as`, \
        else pap.yaml `notifications.user`, else $USER. That user may answer approval requests \
        unless pap.yaml `chat.approvers` names others; answers are asked of the person through \
        the client (MCP elicitation), never taken from a tool's arguments.\n\n\
        Resources: ui://chat/inbox, ui://chat/session/{id}, pap://invocations/{id}, \
        pap://notifications/{id}. Tools: chat_read_since, chat.human.post, chat.assistant.post \
        (and chat_human_post, chat_assistant_post), inbox_ack, invocations_list, invocation_show, \
        audit_log, event_explain, approval_respond.\n\n\
        A human's post becomes a `pap.chat.human.posted` event, decided by `pap serve` (told at \
        once when it runs; else the next serve to start decides it). The same server answers at \
        /mcp on serve's HTTP listener.\n\n\
        Exit status: 0 the client closed the connection; 1 the project or the store could not \
        be used.\n\n\
        Examples:\n  pap mcp\n  pap --root /srv/ops mcp --as alice\n  \
        npx @modelcontextprotocol/inspector --cli pap mcp --method tools/list"
    )]
    Mcp(McpArgs),

    /// Make an argon2 hash of a password for `listen.auth.principals[].password_hash`.
    #[command(
        after_help = "The password is read from the terminal (twice, not echoed) or, when stdin is \
        not a terminal, from its first line. The hash (PHC form, `$argon2id$…`) goes to stdout; \
        put it in pap.yaml as the principal's `password_hash`. The password itself is never \
        written anywhere.\n\n\
        Exit status: 0 printed; 1 the two entries differ or the password is empty.\n\n\
        Examples:\n  pap hash-password\n  printf '%s\\n' \"$PASSWORD\" | pap hash-password"
    )]
    HashPassword,

    /// Print a shell's completion script for pap.
    #[command(after_help = "Examples:\n  \
        pap completions bash > ~/.local/share/bash-completion/completions/pap\n  \
        pap completions zsh > ~/.zfunc/_pap      # with fpath+=~/.zfunc before compinit\n  \
        pap completions fish > ~/.config/fish/completions/pap.fish")]
    Completions(CompletionsArgs),

    /// Print pap's manual page (roff), for `man`.
    #[command(after_help = "Examples:\n  pap man | man -l -\n  \
        pap man > /usr/local/share/man/man1/pap.1")]
    Man,

    /// Is pap healthy: serve, the queue, approvals waiting, failing sinks, schedules, the store.
    #[command(
        after_help = "Needs attention (exit 5) when an approval has waited past half its deadline, \
        a sink is failing (a delivery failed or is being retried), queued work is overdue by more \
        than 5 minutes, or the project has errors. It only reads the state.\n\n\
        Exit status: 0 healthy; 5 something needs a person; 1 the state cannot be read.\n\n\
        Examples:\n  pap status\n  pap status --json | jq .queue\n  \
        pap status >/dev/null || page-oncall   # in a cron job"
    )]
    Status(StatusArgs),

    /// The notification ledger (every notification, also those for agents), or one in full.
    #[command(
        after_help = "Examples:\n  pap notifications\n  pap notifications --status escalated --json\n  \
        pap notifications show ntf_12"
    )]
    Notifications(NotificationsArgs),
}

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The local user this server acts as (default: pap.yaml `notifications.user`, else $USER).
    #[arg(long = "as", value_name = "NAME")]
    pub as_user: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct InboxArgs {
    #[command(subcommand)]
    pub command: Option<InboxCommand>,

    /// Only messages with an id strictly above this one.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub after: u64,

    /// At most this many messages (default: all).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Only this session's thread.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,

    /// One JSON object per message, one per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// Mark messages as seen: their notifications become DELIVERED.
    #[command(
        after_help = "Exit status: 0 every id acknowledged; 1 an unknown or FAILED message (the \
        other ids still count).\n\n\
        Examples:\n  pap inbox ack 42\n  pap inbox ack 42 43 --by alice"
    )]
    Ack {
        /// Inbox message ids.
        #[arg(required = true)]
        ids: Vec<u64>,
        /// Who acknowledges (default: the configured user).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Follow the inbox: print messages as they arrive (Ctrl-C stops).
    #[command(
        after_help = "It only reads: it never holds the store's write lock.\n\n\
        Examples:\n  pap inbox watch\n  pap inbox watch --after 0 --json | jq -r .content"
    )]
    Watch {
        /// Start after this id (default: the newest message now).
        #[arg(long, value_name = "ID")]
        after: Option<u64>,
        /// How often to look (`500ms`, `2s`; a bare number is seconds).
        #[arg(long, value_name = "DURATION", value_parser = duration_arg, default_value = "500ms")]
        interval: std::time::Duration,
        /// One JSON object per message, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Session threads: notifications addressed to a session go to its thread while it is
    /// open, and to the user's inbox once it is closed (ANP 2.1).
    #[command(
        subcommand,
        after_help = "Examples:\n  pap inbox session open incident-db1\n  \
        pap inbox --session incident-db1\n  pap inbox session close incident-db1"
    )]
    Session(SessionCommand),
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Open a session thread: notifications addressed to it gather there.
    #[command(
        after_help = "With --agent, a person's post in this session (chat.human.post over MCP) \
        reaches that agent at its next turn as user text.\n\n\
        Examples:\n  pap inbox session open incident-db1\n  \
        pap inbox session open incident-db1 --agent db-triage"
    )]
    Open {
        /// The session's name (notification routes name it with `session:`).
        name: String,
        /// Bind the session to this agent (re-opening an open session rebinds it).
        #[arg(long, value_name = "ID")]
        agent: Option<String>,
    },
    /// Close a session thread: what is addressed to it goes to the user's inbox from now on.
    #[command(after_help = "Example:\n  pap inbox session close incident-db1")]
    Close {
        /// The session's name.
        name: String,
    },
    /// List the open session threads and when each was opened.
    #[command(after_help = "Examples:\n  pap inbox session list\n  pap inbox session list --json")]
    List {
        /// One JSON object per session.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct RespondArgs {
    /// The ATP response message (JSON); `-` reads stdin.
    pub file: PathBuf,
    /// Print the invocation as JSON when done.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct NotificationsArgs {
    #[command(subcommand)]
    pub command: Option<NotificationsCommand>,

    /// Only notifications with this status.
    #[arg(long, value_enum)]
    pub status: Option<crate::domain::NotifyStatus>,

    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,

    /// Only the last N (default for humans: 20; with --json: all).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum NotificationsCommand {
    /// Everything about one notification: routing, status history, leases, sinks.
    #[command(after_help = "Examples:\n  pap notifications show ntf_12\n  \
        pap notifications show 12               # the same, by its number\n  \
        pap notifications show 3f2a9c1e --json  # by (a prefix of) its ATP request's id")]
    Show {
        /// The notification: its id, its number, or its ATP request's id (or a prefix).
        id: String,
        /// As one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// How many invocations run at once (default: `serve.max_concurrent` in pap.yaml, else 4).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_concurrent: Option<u32>,

    /// How long running agents get to finish after SIGINT/SIGTERM, as in pap.yaml (`10s`,
    /// `2m`) or in seconds (default: `serve.grace_period`, else 10s).
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub grace: Option<std::time::Duration>,

    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "human")]
    pub log_format: LogFormat,

    /// Do what is due now, then exit: claim every spool file, run the due invocations, fire
    /// due schedules, purge. For cron-driven setups and tests.
    #[arg(long)]
    pub once: bool,

    /// Answer HTTP on HOST:PORT (default: `listen.address` in pap.yaml, else no HTTP):
    /// `POST /v1/events`, `/healthz`, `/readyz`. Port 0 picks a free port (logged).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

impl From<LogFormat> for crate::serve::log::LogFormat {
    fn from(format: LogFormat) -> Self {
        match format {
            LogFormat::Human => Self::Human,
            LogFormat::Json => Self::Json,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// List the schedules with their next fire time and the last one recorded.
    #[command(after_help = "Examples:\n  pap schedule list\n  pap schedule list --json")]
    List(ScheduleListArgs),

    /// Show the next fire times of a schedule, in UTC and in its time zone.
    #[command(
        after_help = "Examples:\n  pap schedule next nightly-report\n  pap schedule next nightly-report -n 10 --json"
    )]
    Next(ScheduleNextArgs),
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Verify the store: every page checksum, then every record decoded.
    #[command(
        after_help = "Exit status: 0 the store is sound; 1 it is damaged (or was repaired: \
        take a backup and look at what changed); 2 usage error.\n\n\
        Examples:\n  pap store check\n  pap store check --json | jq .ok"
    )]
    Check(StoreCheckArgs),

    /// Copy the store to FILE while other pap processes keep using it; the copy is consistent
    /// (taken between transactions) and verified.
    #[command(
        after_help = "Restore by stopping every pap on the state dir and copying FILE \
        over <state>/state.redb.\n\n\
        Examples:\n  pap store backup /backups/pap-$(date +%F).redb\n  \
        pap store backup state.copy --force    # replace an earlier copy"
    )]
    Backup(StoreBackupArgs),

    /// Give the state file's free space back to the file system, and say how much it took
    /// before and after. Needs the store to itself: refused while `pap serve` runs.
    #[command(
        after_help = "The purge frees pages as records pass their retention, and later writes \
        reuse them, so a steady workload holds a steady file without this. Compaction is for \
        after a one-off surplus (a backfill whose keys were purged a TTL later). It holds the \
        file for writing until it is done: other pap commands wait for it, and a `pap serve` \
        started meanwhile is refused. A PostgreSQL state has no file to compact: autovacuum \
        makes dead rows' room reusable (see the book's Retention and purge page).\n\n\
        Exit status: 0 compacted; 1 it could not be (serve runs, a PostgreSQL state, an I/O \
        error); 2 usage error.\n\n\
        Examples:\n  pap store compact\n  pap store compact --json | jq '.before - .after'"
    )]
    Compact(StoreCompactArgs),

    /// Create or upgrade the PostgreSQL schema of the state (PAP_DATABASE_URL, else `store:`
    /// in pap.yaml); a redb state needs nothing.
    #[command(
        after_help = "Run once before the first node starts, and before nodes of a new release \
        start. Migrations expand the schema first (the previous release keeps working beside \
        the new one during a rolling upgrade) and contract it only in a later release. Two \
        nodes migrating at once take turns. The password comes from PAP_DATABASE_PASSWORD or \
        PGPASSWORD.\n\n\
        Exit status: 0 the schema is current; 1 a migration failed; 2 usage error.\n\n\
        Examples:\n  PAP_DATABASE_URL=postgres://pap@db.internal/pap pap store migrate\n  \
        pap store migrate --json"
    )]
    Migrate(StoreMigrateArgs),

    /// Copy the whole state into another, empty store: a PostgreSQL database, or a new redb
    /// file.
    #[command(
        after_help = "Everything decisions depend on moves: idempotency claims with the ledger, \
        throttle windows, debounces, budgets, invocations with their leases, schedules, the \
        outbox, the audit log, notifications, the inbox and agents' queues, and where each \
        sequence stands. Stop every pap using the state first (a copy is one snapshot: \
        decisions made after it are not in it). A database target is migrated first; its \
        password comes from PAP_DATABASE_PASSWORD or PGPASSWORD, never from --to. A redb \
        target is a new file; put it at <state>/state.redb to use it.\n\n\
        Examples:\n  pap store copy --to postgres://pap@db.internal/pap\n  \
        PAP_DATABASE_URL=postgres://pap@db.internal/pap pap store copy --to state.redb"
    )]
    Copy(StoreCopyArgs),
}

#[derive(Debug, clap::Args)]
pub struct StoreCopyArgs {
    /// A `postgres://` URL, or the path of a new redb file.
    #[arg(long, value_name = "TARGET")]
    pub to: String,
    /// The result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct StoreMigrateArgs {
    /// The result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct StoreCheckArgs {
    /// The result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct StoreCompactArgs {
    /// The sizes as one JSON object: `before`, `after` (the file, bytes), `live` (the pages
    /// the tables take), `path`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct StoreBackupArgs {
    /// Where the copy goes.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct ScheduleListArgs {
    /// One JSON object per schedule, one per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ScheduleNextArgs {
    /// The schedule id.
    pub id: String,

    /// How many fire times.
    #[arg(short = 'n', long = "count", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,

    /// Count from this time (RFC 3339) instead of now.
    #[arg(long, value_name = "TIME")]
    pub after: Option<String>,

    /// One JSON object per fire time, one per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct AdaptArgs {
    /// The adapter: a built-in one (listed below) or a name under `adapters:` in pap.yaml.
    #[arg(value_name = "NAME")]
    pub adapter: String,

    /// Webhook bodies, one per file, as their sender posts them; `-` reads stdin.
    #[arg(value_name = "FILE", default_value = "-")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// Event files; `-` reads stdin.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// Each FILE is one webhook body for this adapter (a built-in one, as `pap adapt --help`
    /// lists them, or one under `adapters:` in pap.yaml), mapped to events as a post of it to
    /// /v1/ingest/NAME is.
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,

    /// One JSON object per event, one per line (the book's JSON shapes page lists the fields).
    #[arg(long)]
    pub json: bool,

    /// Decide with the real state but write nothing and run nothing.
    #[arg(long, conflicts_with = "no_run")]
    pub dry_run: bool,

    /// Record invocations as `queued` instead of running them (for `pap serve`).
    #[arg(long)]
    pub no_run: bool,

    /// Show every trigger considered and each condition with the value it saw.
    #[arg(long)]
    pub explain: bool,

    /// With --dry-run: decide as if it were this moment (RFC 3339), against the real state
    /// (throttle windows, idempotency keys and their expiry as they would be then).
    #[arg(long, value_name = "TIME", requires = "dry_run", value_parser = parse_timestamp)]
    pub at: Option<jiff::Timestamp>,

    /// How many agents may run at once.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,

    /// How long running agents get to finish after SIGINT/SIGTERM, as in pap.yaml (`10s`,
    /// `2m`) or in seconds (default: `serve.grace_period`, else 10s).
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub grace: Option<std::time::Duration>,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InvocationsArgs {
    #[command(subcommand)]
    pub command: Option<InvocationsCommand>,

    /// Only invocations with this status.
    #[arg(long, value_enum)]
    pub status: Option<crate::domain::Status>,

    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,

    /// Show only the last N (default for humans: 20; with --json: all); with --after, the
    /// first N after the cursor.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Only invocations made after the one whose `cursor` this is (each --json row carries
    /// its own), oldest first: pages that stay right while new invocations are made.
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum InvocationsCommand {
    /// Everything about one invocation: status, attempts, output or error, the event.
    #[command(
        after_help = "Of one awaiting approval, it also shows why it waits, the event's data and \
        the commands to approve or reject it.\n\n\
        Examples:\n  pap invocations show 3e0313\n  pap invocations show 3e0313 --json | jq .history"
    )]
    Show {
        /// The invocation: its full id, a prefix of it, or its short form.
        id: String,
        /// As one JSON object.
        #[arg(long)]
        json: bool,
    },

    /// Run a failed, rejected, expired or cancelled invocation again, as a new invocation
    /// linked to it (`retry_of`) under the same idempotency claim.
    #[command(
        after_help = "The risk rules apply again: a high-risk agent waits for approval \
        again, and retrying a rejection needs --by. Throttle windows count the retry but never \
        refuse it. Its completion or failure event gets a new id. With a running pap serve the \
        retry is handed to it; otherwise this command runs it (unless --no-run).\n\n\
        Exit status: 0 the retry succeeded (or was queued, or waits for approval); 4 it failed \
        after its retries; 1 the invocation cannot be retried (unknown, or not ended without \
        success); 2 usage error.\n\n\
        Examples:\n  pap invocations retry inv_0195a3c2e1f0a1b2c3d4e5f6a7b8c9d0\n  \
        pap invocations retry inv_0195a3c2e1f0a1b2c3d4e5f6a7b8c9d0 --by alice --json\n  \
        pap invocations retry inv_0195a3c2e1f0a1b2c3d4e5f6a7b8c9d0 --no-run   # leave it to pap serve"
    )]
    Retry(RetryArgs),

    /// Stop invocations that have not finished (queued, waiting for a retry, awaiting
    /// approval, or running); they end as `cancelled`, with no failure event.
    #[command(
        after_help = "A running command agent is stopped with its whole process group \
        (SIGTERM, then SIGKILL after --grace). A running LLM agent is not interrupted mid-request: \
        its result is discarded when it ends. Each cancelled invocation gets its `cancelled` \
        notification and an audit line naming who cancelled it.\n\n\
        Exit status: 0 every invocation named was cancelled (with --trigger: also when none was \
        unfinished); 1 some could not be (unknown, or already ended); 2 usage error.\n\n\
        Examples:\n  pap invocations cancel inv_0195a3c2e1f0a1b2c3d4e5f6a7b8c9d0 --reason \"wrong host\"\n  \
        pap invocations cancel --trigger energy-price-spike --by alice   # kill switch for a runaway trigger\n  \
        pap invocations cancel --trigger energy-price-spike --json | jq -r .id"
    )]
    Cancel(CancelArgs),
}

#[derive(Debug, clap::Args)]
pub struct RetryArgs {
    /// The invocation to run again.
    pub id: String,
    /// Who retries (default: $USER; required to retry a rejection).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Only queue the retry (for `pap serve`); do not run it here.
    #[arg(long)]
    pub no_run: bool,
    /// Print the new invocation as JSON when done.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["ids", "trigger"])))]
pub struct CancelArgs {
    /// The invocations to cancel.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// Cancel every unfinished invocation of this trigger.
    #[arg(long, value_name = "TRIGGER", conflicts_with = "ids")]
    pub trigger: Option<String>,
    /// Who cancels (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Why, for the notification and the audit log.
    #[arg(long, value_name = "TEXT", value_parser = non_blank)]
    pub reason: Option<String>,
    /// How long a running agent gets between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, default_value = "5s")]
    pub grace: std::time::Duration,
    /// One JSON object per cancelled invocation.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The invocation: its full id, a prefix of it, or its short form.
    pub id: String,
    /// Who approves (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Why, for the audit log.
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Print the invocation as JSON when done.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// The invocation: its full id, a prefix of it, or its short form.
    pub id: String,
    /// Why; recorded and carried in the failure event (not empty).
    #[arg(long, value_name = "TEXT", required = true, value_parser = non_blank)]
    pub reason: String,
    /// Who rejects (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Print the invocation as JSON when done.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// One JSON object per check.
    #[arg(long)]
    pub json: bool,
    /// How long an MCP server gets to start, and then to list its tools.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, default_value = "30s")]
    pub timeout: std::time::Duration,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also what each of the store's tables takes, largest first (`store.tables` in the
    /// JSON). It reads every page of the store: seconds on a large one, so not by default.
    #[arg(long)]
    pub tables: bool,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Show only the last N (default for humans: 50; with --json: all).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Files or directories to check (default: the whole project under --root).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Output format; every format writes to stdout.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,

    /// Treat warnings as errors (exit 1 when there is any).
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// rustc-style messages with a source snippet.
    Human,
    /// One JSON document with counts and diagnostics.
    Json,
    /// GitHub Actions workflow annotations.
    Github,
}

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test files or folders (default: rule-tests/ under the project root).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Output format; every format writes to stdout.
    #[arg(long, value_enum, default_value_t = TestFormat::Human)]
    pub format: TestFormat,

    /// Also list enabled triggers no case's event was decided by, and filter conditions no
    /// case saw hold or fail.
    #[arg(long)]
    pub coverage: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    /// `ok`/`FAIL` per case, the failing condition with the value seen, the totals.
    Human,
    /// One JSON document: the cases, their failures, the totals (and the coverage).
    Json,
    /// JUnit XML for CI servers (Jenkins, GitLab).
    Junit,
    /// GitHub Actions workflow annotations on the failing lines.
    Github,
}

#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Which manifest kind (omit with --out to write them all).
    #[arg(value_enum, required_unless_present = "out")]
    pub kind: Option<SchemaKind>,

    /// Write `<kind>.schema.json` files into this directory instead of printing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    /// Trigger manifests (`triggers/*.yaml`).
    Trigger,
    /// Agent manifests (`agents/*.yaml`).
    Agent,
    /// The project config (`pap.yaml`).
    Config,
    /// Schedules (`schedules/*.yaml`, or `schedules:` in pap.yaml).
    Schedule,
    /// Rule test files (`pap test`).
    RuleTest,
}

impl SchemaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaKind::Trigger => "trigger",
            SchemaKind::Agent => "agent",
            SchemaKind::Config => "config",
            SchemaKind::Schedule => "schedule",
            SchemaKind::RuleTest => "rule-test",
        }
    }
}

/// An RFC 3339 timestamp argument (`2026-03-11T06:00:00Z`, `2026-03-11T07:00:00+01:00`).
fn parse_timestamp(text: &str) -> Result<jiff::Timestamp, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not an RFC 3339 time such as 2026-03-11T06:00:00Z"))
}

/// A free-text argument that must say something (a rejection's reason).
/// A duration flag: the syntax of pap.yaml (`500ms`, `90s`, `5m`, `1h30m`), or a number of
/// seconds.
fn duration_arg(text: &str) -> Result<std::time::Duration, String> {
    /// Longer is a typo, and would overflow the clock arithmetic it feeds.
    const LONGEST: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);
    let parsed = match text.trim().parse::<f64>() {
        Ok(seconds) if seconds >= 0.0 => std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|_| "too long a duration (at most 30d)".to_owned())?,
        Ok(_) => {
            return Err("give a duration such as 10s, 2m or 1h30m (or seconds, 0 or more)".into());
        }
        Err(_) => crate::manifest::duration::parse(text).map_err(|e| e.to_string())?,
    };
    if parsed > LONGEST {
        return Err("too long a duration (at most 30d)".into());
    }
    Ok(parsed)
}

fn non_blank(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        Err("must not be empty: say why, for the audit log and the agent's failure event".into())
    } else {
        Ok(text.to_owned())
    }
}

/// `pap adapt --help`'s text after the options: the built-in adapters are the engine's list.
fn adapt_help() -> String {
    format!(
        "NAME is a built-in adapter ({}) or one declared under `adapters:` in pap.yaml. {}",
        crate::adapter::presets::listed(),
        "Each FILE (`-` reads stdin) is one webhook body as its sender \
        posts it, bounded by listen.max_body_bytes.\n\n\
        Output: each event as one line of JSON, as it would be decided (PAP 0.2), ready for \
        `pap dispatch -`. An element the adapter cannot make a valid event of is named on stderr \
        with its index, and the others are still printed.\n\n\
        Exit status: 0 every element made a valid event; 3 some did not, or a body made none \
        (not JSON, no alerts); 1 a file could not be read or the project does not load; 2 usage \
        error (an adapter the project does not have).\n\n\
        Examples:\n  pap adapt alertmanager alert.json\n  \
        pap adapt alertmanager alert.json | jq -r '.id + \"  \" + .data.labels.alertname'\n  \
        pap adapt grafana grafana.json | pap dispatch - --dry-run --explain\n  \
        pap dispatch --adapter alertmanager alert.json   # mapped and decided in one step"
    )
}
