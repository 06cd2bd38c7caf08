//! The store's format across releases: a file written by the first released format (6) is
//! checked in (`tests/fixtures/store/format-6.redb`: the example project's nine events
//! dispatched at 2026-03-11T06:00:00Z, without API keys, then compacted) and every later pap
//! must read it, migrating it in place when its format moved on. A development build's file
//! (format 5 and before) is refused with a message, never misread.

use crate::common;

use common::{code, fixture, pap, stderr, stdout};
use serde_json::Value;

const SUCCEEDED: &str = "inv_019cdb7b0b00373dbd64595f93f9d5d1";
const AWAITING: &str = "inv_019cdb7b0b0030f4e3f91db82cbafbe1";

fn state_from_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("store/format-6.redb"),
        dir.path().join("state.redb"),
    )
    .unwrap();
    dir
}

fn run(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    pap()
        .arg("--state")
        .arg(state)
        .args(args)
        .env("PAP_NOW", "2026-03-11T06:00:00Z")
        .output()
        .unwrap()
}

#[test]
fn a_format_6_store_reads_whole() {
    let state = state_from_fixture();
    let check = run(state.path(), &["store", "check"]);
    assert_eq!(code(&check), 0, "{}{}", stdout(&check), stderr(&check));
    assert!(
        stdout(&check).contains("8 invocations, 9 ledger rows, 7 audit entries, 8 notifications"),
        "{}",
        stdout(&check)
    );

    let list = run(state.path(), &["invocations", "--json"]);
    assert_eq!(code(&list), 0, "{}", stderr(&list));
    let rows: Vec<Value> = stdout(&list)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let statuses: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses,
        [
            "awaiting_approval",
            "failed",
            "failed",
            "failed",
            "failed",
            "succeeded",
            "failed",
            "failed"
        ]
    );

    // The event is stored once, apart from the record, and comes back whole.
    let shown = run(state.path(), &["invocations", "show", SUCCEEDED, "--json"]);
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    let inv: Value = serde_json::from_str(&stdout(&shown)).unwrap();
    let example: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/events/server-latency-sla-breach.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(inv["event"], example);
    assert_eq!(inv["output"]["severity"], "major");
    assert_eq!(inv["history"][0]["attempt"], 1);
}

#[test]
fn a_format_6_store_takes_new_work_and_decisions() {
    let state = state_from_fixture();
    // The awaiting invocation is approved and run (its agent has no API key here: exit 4,
    // failed), and the same events are duplicates now.
    let approve = run(
        state.path(),
        &["approve", AWAITING, "--by", "ann", "--json"],
    );
    assert_eq!(
        code(&approve),
        4,
        "{}{}",
        stdout(&approve),
        stderr(&approve)
    );
    let approved: Value = serde_json::from_str(&stdout(&approve)).unwrap();
    assert_eq!(approved["approval"]["by"], "ann");
    assert_eq!(approved["event_id"], "evt_c5e19b");
    assert_eq!(approved["status"], "failed");
    let again = pap()
        .arg("--state")
        .arg(state.path())
        .args(["dispatch", "--no-run", "--json"])
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/events/server-latency-sla-breach.json"),
        )
        .env("PAP_NOW", "2026-03-11T06:01:00Z")
        .output()
        .unwrap();
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(
        stdout(&again).contains("\"duplicate\""),
        "{}",
        stdout(&again)
    );
}

/// `session_agents` came into format 6 after the fixture was written: readers treat it as
/// empty, and the first write that needs it creates it.
#[test]
fn a_format_6_store_from_before_session_agents_reads_and_binds_sessions() {
    let state = state_from_fixture();
    let inbox = run(state.path(), &["inbox", "--json"]);
    assert_eq!(code(&inbox), 0, "{}", stderr(&inbox));
    assert_eq!(stdout(&inbox).lines().count(), 8);

    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join("agents")).unwrap();
    std::fs::write(project.path().join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
    std::fs::write(
        project.path().join("agents/helper.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: helper\n  risk_level: low\n  model:\n    provider: command\n    command: [\"true\"]\n",
    )
    .unwrap();
    let with_project = |args: &[&str]| {
        pap()
            .arg("--root")
            .arg(project.path())
            .arg("--state")
            .arg(state.path())
            .args(args)
            .output()
            .unwrap()
    };
    let open = with_project(&["inbox", "session", "open", "ops", "--agent", "helper"]);
    assert_eq!(code(&open), 0, "{}", stderr(&open));
    let list = with_project(&["inbox", "session", "list", "--json"]);
    let row: Value = serde_json::from_str(stdout(&list).lines().next().unwrap()).unwrap();
    assert_eq!(row["name"], "ops");
    assert_eq!(row["agent"], "helper");
    let unknown = with_project(&["inbox", "session", "open", "x", "--agent", "nobody"]);
    assert_eq!(code(&unknown), 1);
    assert!(
        stderr(&unknown).contains("no agent nobody"),
        "{}",
        stderr(&unknown)
    );
}

/// A format-6 store with work behind concurrency keys (`format-6-concurrency.redb`, see its
/// script): format 7 lists a waiter as due work only while its keys admit it, so the first
/// open migrates the file, and serve then runs the crashed run and the six waiters, one at a
/// time per host, at most three at once, each host's in decision order.
#[test]
fn a_format_6_store_with_work_behind_concurrency_keys_is_migrated_and_run_in_order() {
    let state = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("store/format-6-concurrency.redb"),
        state.path().join("state.redb"),
    )
    .unwrap();
    let project = common::shell_agent::project(
        "  concurrency: {limit: 3}\n",
        "  concurrency: {limit: 1, key: $.data.host}\n",
        |log| {
            format!(
                "in=$(cat); h=${{in#*\\\"host\\\":\\\"}}; h=${{h%%\\\"*}}; n=${{in#*\\\"n\\\":}}; n=${{n%%[!0-9]*}}; echo \"start $h $n $(date +%s%N)\" >> '{log}'; sleep 0.2; echo \"end $h $n $(date +%s%N)\" >> '{log}'; echo '{{}}'",
                log = log.display()
            )
        },
    );
    let root = project.path();
    // An hour later: the crashed serve's lease on db1-1 has lapsed.
    let serve = pap()
        .arg("--root")
        .arg(root)
        .arg("--state")
        .arg(state.path())
        .args(["serve", "--once", "--max-concurrent", "8"])
        .env("PAP_NOW", "2026-03-11T07:00:00Z")
        .output()
        .unwrap();
    assert_eq!(code(&serve), 0, "{}", stderr(&serve));
    let lines = common::shell_agent::host_log(root);
    assert_eq!(lines.len(), 14, "every run started and ended: {lines:?}");
    for host in ["db1", "db2"] {
        let mine: Vec<_> = lines.iter().filter(|l| l.1 == host).collect();
        let starts: Vec<u32> = mine
            .iter()
            .filter(|l| l.0 == "start")
            .map(|l| l.2)
            .collect();
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        assert_eq!(starts, sorted, "{host} in decision order: {lines:?}");
        for pair in mine.chunks(2) {
            assert_eq!(
                (&pair[0].0[..], &pair[1].0[..]),
                ("start", "end"),
                "{host} one at a time: {lines:?}"
            );
        }
    }
    let mut edges: Vec<(u128, i32)> = lines
        .iter()
        .map(|l| (l.3, if l.0 == "start" { 1 } else { -1 }))
        .collect();
    edges.sort();
    let most = edges
        .iter()
        .scan(0, |now, (_, step)| {
            *now += step;
            Some(*now)
        })
        .max();
    assert!(most <= Some(3), "the agent's limit is 3: {lines:?}");
    let list = run(state.path(), &["invocations", "--json"]);
    assert_eq!(common::statuses(&list), vec!["succeeded"; 7]);
}

/// Money budgets add fields to JSON parts of existing records and no format: a store
/// the last pap before them wrote (`tests/fixtures/store/format-9-spend.redb`, see the script
/// beside it) reads as it is. Its run shows with its tokens and no cost; its agent's token
/// budget still counts the 120 tokens it used; priced and given a money budget, the agent's
/// next run is reserved and recorded in money from nothing, beside the old use.
#[test]
fn a_store_from_before_money_budgets_keeps_its_runs_and_token_budget() {
    use common::fake_llm::{FakeLlm, Scripted, anthropic_text};
    let fake = FakeLlm::start(vec![Scripted::ok(anthropic_text("second"))]);
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join(".pap")).unwrap();
    std::fs::create_dir_all(r.join("agents")).unwrap();
    std::fs::create_dir_all(r.join("triggers")).unwrap();
    std::fs::copy(
        fixture("store/format-9-spend.redb"),
        r.join(".pap/state.redb"),
    )
    .unwrap();
    std::fs::write(
        r.join("pap.yaml"),
        "pap_version: \"0.2\"\nprices:\n  anthropic:\n    test-model: {input: 3.0, output: 15.0}\n",
    )
    .unwrap();
    std::fs::write(
        r.join("agents/writer.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: writer\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"{}\"\n    max_tokens: 100\n  limits:\n    max_tool_calls: 1\n  budget:\n    tokens_per_day: 10000\n    usd_per_day: 1\n",
            fake.url
        ),
    )
    .unwrap();
    std::fs::write(
        r.join("triggers/stale.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: stale\n  match:\n    type: docs.page.stale\n  agent: writer\n",
    )
    .unwrap();
    let at = |when: &str, args: &[&str]| {
        pap()
            .arg("--root")
            .arg(r)
            .args(args)
            .env("PAP_NOW", when)
            .env("ANTHROPIC_API_KEY", "sk-test")
            .output()
            .unwrap()
    };
    let check = at("2026-03-11T07:00:00Z", &["store", "check"]);
    assert_eq!(code(&check), 0, "{}{}", stdout(&check), stderr(&check));

    // The old run: tokens, no cost (no price was known when it ran).
    let list = at("2026-03-11T07:00:00Z", &["invocations", "--json"]);
    let rows: Vec<Value> = stdout(&list)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{}", stdout(&list));
    assert_eq!(rows[0]["status"], "succeeded");
    assert_eq!(rows[0]["cost"], Value::Null);
    let id = rows[0]["id"].as_str().unwrap();
    let show = at("2026-03-11T07:00:00Z", &["invocations", "show", id]);
    assert!(
        stdout(&show).contains("tokens in 100 out 20 · cost unknown"),
        "{}",
        stdout(&show)
    );

    // A second event an hour later: the budgets see the old 120 tokens and no money.
    let event = r.join("p2.json");
    std::fs::write(
        &event,
        r#"{"pap_version":"0.2","id":"p2","type":"docs.page.stale","source":"test","time":"2026-03-11T07:00:00Z","data":{"page":"faq"}}"#,
    )
    .unwrap();
    let run = at(
        "2026-03-11T07:00:00Z",
        &["dispatch", "--json", event.to_str().unwrap(), "--explain"],
    );
    assert_eq!(code(&run), 0, "{}{}", stdout(&run), stderr(&run));
    assert_eq!(fake.requests().len(), 1);
    let list = at("2026-03-11T07:00:01Z", &["invocations", "--json"]);
    let second: Value = stdout(&list)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|i| i["event_id"] == "p2")
        .unwrap();
    // 100 × 3 + 20 × 15 = 600 millionths of a dollar.
    assert_eq!(second["cost"]["micros"], 600, "{second}");

    // The ledger holds the old use (tokens only) and the new one (tokens and money): a
    // budget small enough shows both in its reason.
    std::fs::write(
        r.join("agents/writer.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: writer\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"{}\"\n    max_tokens: 100\n  limits:\n    max_tool_calls: 1\n  budget:\n    tokens_per_day: 240\n",
            fake.url
        ),
    )
    .unwrap();
    std::fs::write(&event, r#"{"pap_version":"0.2","id":"p3","type":"docs.page.stale","source":"test","time":"2026-03-11T07:00:00Z","data":{}}"#).unwrap();
    let run = at(
        "2026-03-11T07:00:02Z",
        &["dispatch", "--json", "--no-run", event.to_str().unwrap()],
    );
    let line: Value = serde_json::from_str(stdout(&run).lines().next().unwrap()).unwrap();
    let reason = line["triggers"][0]["reason"].to_string();
    assert!(reason.contains("240 of 240 tokens"), "{line}");
}

/// A store of format 9 (the last before the index of approvals by the middle of their time
/// to answer) is migrated in place: its approvals are counted past half, expired and waiting
/// as before, and the oldest is named, from the new index.
#[test]
fn a_format_9_store_counts_its_approvals_past_half_after_the_migration() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join(".pap")).unwrap();
    std::fs::copy(
        fixture("store/format-9-approvals.redb"),
        r.join(".pap/state.redb"),
    )
    .unwrap();
    std::fs::write(
        r.join("pap.yaml"),
        "pap_version: \"0.2\"\napproval_timeout: 24h\n",
    )
    .unwrap();
    let status_at = |when: &str| -> Value {
        let out = pap()
            .arg("--root")
            .arg(r)
            .args(["status", "--json"])
            .env("PAP_NOW", when)
            .output()
            .unwrap();
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
    };
    // a1 (half at 12:00) and a2 (16:00) past half at 17:00; a3 (18:00) not yet.
    let s = status_at("2026-03-11T17:00:00Z");
    assert_eq!(s["approvals_waiting"], 3, "{s}");
    assert_eq!(s["queue"]["queued"], 2, "{s}");
    let attention = s["attention"].to_string();
    assert!(
        attention.contains("2 approval(s) waiting past half their deadline"),
        "{attention}"
    );
    let past: Vec<bool> = s["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["past_half"].as_bool().unwrap())
        .collect();
    assert_eq!(past, [true, true, false]);
    // A day and an hour after a1: a1 has expired (not yet recorded), a2 and a3 are past half.
    let s = status_at("2026-03-12T01:00:00Z");
    assert_eq!(s["approvals_waiting"], 2, "{s}");
    let attention = s["attention"].to_string();
    assert!(
        attention.contains("2 approval(s) waiting past half their deadline"),
        "{attention}"
    );
    let check = pap()
        .arg("--root")
        .arg(r)
        .args(["store", "check"])
        .env("PAP_NOW", "2026-03-12T01:00:00Z")
        .output()
        .unwrap();
    assert_eq!(code(&check), 0, "{}{}", stdout(&check), stderr(&check));
}
