//! Secrets: a key a provider echoes, or a token a command agent prints,
//! is redacted in everything pap prints or stores; a command agent sees only PATH, the locale,
//! `PAP_*` and what its `model.env` passes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::fake_llm::{FakeLlm, Scripted};
use common::{code, pap_at, stderr, stdout};
use serde_json::{Value, json};

const T0: &str = "2026-03-11T06:00:00Z";

/// A key with characters that every encoding changes.
const KEY: &str = "sk-test-\"abc\"/def+ghi=jkl~01";
const KEY_JSON: &str = "sk-test-\\\"abc\\\"/def+ghi=jkl~01";
const KEY_URL: &str = "sk-test-%22abc%22%2Fdef%2Bghi%3Djkl~01";
const TOKEN: &str = "tok-given-to-the-agent-42";
const MARKED: &str = "marked-but-plain-name-7";
const UNPASSED: &str = "pap-own-secret-never-passed-9";

struct Proj {
    dir: tempfile::TempDir,
    logs: tempfile::TempDir,
}

impl Proj {
    /// An OpenAI agent `llm` at `url` (trigger `t-llm`, events `test.llm.asked`) whose failure
    /// event provokes `seer`, a program that writes the event it is given to `seen.ndjson`;
    /// command agents `envy` (prints its environment) and `leaky` (fails quoting a token);
    /// an NDJSON sink.
    fn new(url: &str) -> Proj {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "pap.yaml",
            "pap_version: \"0.2\"\nsecrets: [MARKED_SETTING]\nnotifications:\n  user: alice\n  sinks:\n    - {name: file, type: ndjson, path: out/notes.ndjson}\n",
        );
        for (id, kind, agent) in [
            ("t-llm", "test.llm.asked", "llm"),
            ("t-seen", "pap.agent.invocation.failed", "seer"),
            ("t-env", "test.env.asked", "envy"),
            ("t-leak", "test.leak.asked", "leaky"),
        ] {
            write(
                &format!("triggers/{id}.yaml"),
                &format!(
                    "pap_version: \"0.2\"\ntrigger:\n  id: {id}\n  match:\n    type: {kind}\n  agent: {agent}\n"
                ),
            );
        }
        write(
            "agents/llm.yaml",
            &format!(
                "pap_version: \"0.2\"
agent:
  id: llm
  risk_level: medium
  model:
    provider: openai
    model_id: test-model
    base_url: \"{url}\"
  on_failure:
    emit_event: pap.agent.invocation.failed
"
            ),
        );
        let command = |id: &str, script: &str, env: &str| {
            format!(
                "pap_version: \"0.2\"
agent:
  id: {id}
  risk_level: low
  model:
    provider: command
    command: [\"sh\", \"-c\", {script:?}]
    env: {env}
  output:
    type: text
"
            )
        };
        write(
            "agents/seer.yaml",
            &command(
                "seer",
                "cat >> \"$PAP_TEST_DIR/seen.ndjson\"; echo seen",
                "{PAP_TEST_DIR: \"${PAP_TEST_DIR}\"}",
            ),
        );
        write(
            "agents/envy.yaml",
            &command(
                "envy",
                "env | sort",
                "{GIVEN_TOKEN: \"${GIVEN_TOKEN}\", MARKED_SETTING: \"${MARKED_SETTING}\", PLAIN_SETTING: \"plain-$${GIVEN_TOKEN}\"}",
            ),
        );
        write(
            "agents/leaky.yaml",
            &command(
                "leaky",
                "echo \"cannot log in with $GIVEN_TOKEN\" >&2; exit 1",
                "{GIVEN_TOKEN: \"${GIVEN_TOKEN}\"}",
            ),
        );
        Proj {
            dir,
            logs: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// pap with the key, the agent's token, a marked value and a secret pap keeps to itself.
    fn cmd(&self) -> Command {
        let mut cmd = pap_at(self.root());
        cmd.env("PAP_NOW", T0)
            .env("PAP_TEST_DIR", self.logs.path())
            .env("OPENAI_API_KEY", KEY)
            .env("GIVEN_TOKEN", TOKEN)
            .env("MARKED_SETTING", MARKED)
            .env("SOME_API_KEY", UNPASSED);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    fn event(&self, id: &str, kind: &str) -> PathBuf {
        let path = self.root().join(format!("{id}.json"));
        let event = json!({"pap_version": "0.2", "id": id, "type": kind, "source": "test",
                           "time": "2026-03-11T05:59:00Z", "data": {}});
        std::fs::write(&path, event.to_string()).unwrap();
        path
    }

    fn dispatch(&self, id: &str, kind: &str, json: bool) -> Output {
        let file = self.event(id, kind);
        let mut cmd = self.cmd();
        cmd.arg("dispatch").arg(&file);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    }

    /// The invocation `trigger` made for `event_id`.
    fn invocation_of(&self, event_id: &str, trigger: &str) -> Value {
        let out = self.run(&["invocations", "--json"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let id = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|i| i["event_id"] == event_id && i["trigger"] == trigger)
            .unwrap_or_else(|| panic!("no invocation for {event_id}: {}", stdout(&out)))["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let out = self.run(&["invocations", "show", &id, "--json"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }
}

/// None of `secrets` appears in `text`.
fn assert_clean(what: &str, text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !text.contains(secret),
            "{what} holds the secret {secret:?}:\n{text}"
        );
    }
}

fn key_forms() -> [&'static str; 4] {
    // The common middle of every form (`/def+ghi`) catches a partly redacted key too.
    [KEY, KEY_JSON, KEY_URL, "def+ghi"]
}

#[test]
fn a_key_the_provider_echoes_is_redacted_everywhere_pap_prints_or_stores_it() {
    // The provider (or a proxy in front of it) quotes the key plainly, JSON-escaped and
    // URL-encoded in its error body.
    let body = format!(
        "{{\"error\": {{\"message\": \"Incorrect API key provided: {KEY_JSON}\"}}}} \
         proxy: GET /v1?key={KEY_URL} with Authorization: Bearer {KEY}"
    );
    // e1 meets a server error, retried within the attempt until pap gives up (the last body is
    // quoted); e2 a refusal of the key, which is not retried.
    let mut script: Vec<Scripted> = (0..6)
        .map(|_| Scripted::raw(500, &body).header("retry-after-ms", "1"))
        .collect();
    script.push(Scripted::raw(401, &body));
    let llm = FakeLlm::start(script);
    let p = Proj::new(&llm.url);

    let out = p.dispatch("e1", "test.llm.asked", true);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    // The fake provider really got the key: the test would be empty otherwise.
    assert_eq!(
        llm.requests()[0].headers["authorization"],
        format!("Bearer {KEY}")
    );
    assert_clean("dispatch --json", &stdout(&out), &key_forms());
    assert_clean("dispatch --json stderr", &stderr(&out), &key_forms());
    let human = p.dispatch("e2", "test.llm.asked", false);
    assert_eq!(code(&human), 4, "{}", stderr(&human));
    assert_clean("dispatch", &stdout(&human), &key_forms());
    assert_clean("dispatch stderr", &stderr(&human), &key_forms());

    for (event, status) in [("e1", "HTTP 500"), ("e2", "HTTP 401")] {
        let inv = p.invocation_of(event, "t-llm");
        assert_eq!(inv["status"], "failed", "{inv:#}");
        let error = inv["error"].as_str().unwrap();
        assert!(error.contains(status), "{error}");
        assert!(error.contains("[REDACTED:OPENAI_API_KEY]"), "{error}");
        assert_clean("invocations show --json", &inv.to_string(), &key_forms());
    }
    let inv = p.invocation_of("e1", "t-llm");
    let id = inv["id"].as_str().unwrap();
    for args in [
        vec!["invocations", "show", id],
        vec!["invocations"],
        vec!["inbox", "--json"],
        vec!["inbox"],
        vec!["notifications", "--json"],
        vec!["audit", "--json"],
    ] {
        let out = p.run(&args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        assert_clean(&format!("{args:?}"), &stdout(&out), &key_forms());
    }
    let inbox = stdout(&p.run(&["inbox", "--json"]));
    assert!(inbox.contains("[REDACTED:OPENAI_API_KEY]"), "{inbox}");

    let sink = std::fs::read_to_string(p.root().join("out/notes.ndjson")).unwrap();
    assert!(sink.contains("invocation.failed"), "{sink}");
    assert_clean("the ndjson sink", &sink, &key_forms());

    // The failure event, as the trigger that sees it hands it to its agent.
    let seen = std::fs::read_to_string(p.logs.path().join("seen.ndjson")).unwrap();
    let seen: Value = serde_json::from_str(seen.lines().next().unwrap()).unwrap();
    assert_eq!(seen["event"]["type"], "pap.agent.invocation.failed");
    assert!(
        seen["event"]["data"]["error"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:OPENAI_API_KEY]"),
        "{seen:#}"
    );
    assert_clean("the failure event", &seen.to_string(), &key_forms());

    // Every record the store holds: the file, or a database's backup (which is every record
    // read back out of PostgreSQL).
    let file = if common::on_postgres() {
        let backup = p.root().join("backup.redb");
        let out = common::pap_at(p.root())
            .arg("store")
            .arg("backup")
            .arg(&backup)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        backup
    } else {
        p.root().join(".pap/state.redb")
    };
    let store = std::fs::read(file).unwrap();
    let store = String::from_utf8_lossy(&store);
    assert_clean("the store file", &store, &key_forms());
    assert!(store.contains("[REDACTED:OPENAI_API_KEY]"));
}

#[test]
fn a_command_agent_gets_only_path_locale_pap_variables_and_its_model_env() {
    let p = Proj::new("http://127.0.0.1:9");
    let out = p.dispatch("v1", "test.env.asked", true);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let inv = p.invocation_of("v1", "t-env");
    let env = inv["output"].as_str().unwrap_or_else(|| panic!("{inv:#}"));
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    // pap's own environment stays with pap: its API keys, and everything else.
    assert_clean("the agent's environment", env, &[UNPASSED, KEY]);
    for name in [
        "SOME_API_KEY",
        "OPENAI_API_KEY",
        "PAP_NOW",
        "PAP_TEST_DIR",
        "HOME",
    ] {
        assert!(!names.contains(&name), "{name} reached the agent:\n{env}");
    }
    for name in ["PATH", "PAP_INVOCATION_ID", "PAP_EVENT_ID", "PAP_EMIT_FILE"] {
        assert!(names.contains(&name), "{name} is missing:\n{env}");
    }
    // What model.env passes arrives; a secret-looking or marked one is redacted in the output.
    assert!(env.contains("GIVEN_TOKEN=[REDACTED:GIVEN_TOKEN]"), "{env}");
    assert!(
        env.contains("MARKED_SETTING=[REDACTED:MARKED_SETTING]"),
        "{env}"
    );
    assert!(env.contains("PLAIN_SETTING=plain-${GIVEN_TOKEN}"), "{env}");
    assert_clean("the agent's output", env, &[TOKEN, MARKED]);
    assert_clean("dispatch --json", &stdout(&out), &[TOKEN, MARKED]);
}

#[test]
fn a_token_a_failing_command_agent_prints_is_redacted_in_its_error() {
    let p = Proj::new("http://127.0.0.1:9");
    let out = p.dispatch("k1", "test.leak.asked", false);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert_clean("dispatch", &stdout(&out), &[TOKEN]);
    let inv = p.invocation_of("k1", "t-leak");
    let error = inv["error"].as_str().unwrap();
    assert_eq!(
        error,
        "exited with status 1: cannot log in with [REDACTED:GIVEN_TOKEN]"
    );
    assert_clean("the invocation", &inv.to_string(), &[TOKEN]);
    let notes = stdout(&p.run(&["notifications", "--json"]));
    assert_clean("notifications", &notes, &[TOKEN]);
}

#[test]
fn an_unset_model_env_variable_fails_the_attempt_without_retry() {
    let p = Proj::new("http://127.0.0.1:9");
    let file = p.event("u1", "test.leak.asked");
    let out = p
        .cmd()
        .env_remove("GIVEN_TOKEN")
        .arg("dispatch")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let inv = p.invocation_of("u1", "t-leak");
    assert_eq!(
        inv["error"],
        "model.env GIVEN_TOKEN: environment variable GIVEN_TOKEN is not set in this command's environment"
    );
}

#[test]
fn a_secret_an_event_carries_is_redacted_in_the_notification_that_quotes_its_fields() {
    let p = Proj::new("http://127.0.0.1:9");
    // The default text quotes the event's first fields; this one holds a known secret value.
    let path = p.root().join("q1.json");
    let event = json!({"pap_version": "0.2", "id": "q1", "type": "test.leak.asked",
                       "source": "test", "time": "2026-03-11T05:59:00Z",
                       "data": {"host": "db-1", "token": TOKEN}});
    std::fs::write(&path, event.to_string()).unwrap();
    let out = p.cmd().arg("dispatch").arg(&path).output().unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let notes = stdout(&p.run(&["notifications", "--json"]));
    assert!(
        notes.contains("host=db-1"),
        "the key fields are quoted: {notes}"
    );
    assert_clean("notifications", &notes, &[TOKEN]);
    let inbox = stdout(&p.run(&["inbox", "--json"]));
    assert_clean("the inbox", &inbox, &[TOKEN]);
}
