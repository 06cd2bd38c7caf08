//! Spend budgets (a pap extension) through the real binary on the injected clock: an
//! agent's invocation budget reached mid-stream turns the rest of the stream into
//! `budget_exceeded` and tells a person once; a token budget is reserved when a run starts,
//! so two runs started together cannot spend past it; so is a budget in money, priced from
//! pap.yaml's `prices` with the fake provider's token counts.

use crate::common;

use common::dispatch::{Project, T0, ev, run_of};
use common::fake_llm::{FakeLlm, Scripted, anthropic_text};
use serde_json::{Value, json};

/// Two triggers on one type, both provoking agent `fix`, which may be invoked 3 times a day.
fn invocation_budget_project() -> Project {
    let p = common::llm::project(
        "  risk_level: low\n  model:\n    provider: command\n    command: [\"true\"]\n  budget:\n    invocations_per_day: 3\n",
        None,
    );
    std::fs::write(
        p.root().join("triggers/t-llm.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: first\n  match:\n    type: test.llm.asked\n  agent: a\n",
    )
    .unwrap();
    std::fs::write(
        p.root().join("triggers/u-second.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: second\n  match:\n    type: test.llm.asked\n  agent: a\n",
    )
    .unwrap();
    p
}

#[test]
fn an_invocation_budget_reached_mid_stream_refuses_the_rest_and_tells_a_person_once() {
    let p = invocation_budget_project();
    let events: Vec<Value> = (1..=3)
        .map(|i| ev(&format!("e{i}"), "test.llm.asked", json!({"n": i})))
        .collect();
    let file = p.events("stream.ndjson", &events);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(
        run.code, 0,
        "budget_exceeded counts as success: {}",
        run.stderr
    );
    let outcomes: Vec<String> = ["e1", "e2", "e3"]
        .iter()
        .flat_map(|e| [run.outcome(e, "first"), run.outcome(e, "second")])
        .collect();
    assert_eq!(
        outcomes,
        [
            "queued",
            "queued",
            "queued",
            "budget_exceeded",
            "budget_exceeded",
            "budget_exceeded"
        ]
    );
    let reason = run.trigger("e3", "first")["reason"].as_str().unwrap();
    assert!(
        reason.contains("agent a has used its budget: 3 of 3 invocations in the last 24h"),
        "{reason}"
    );
    // One notification for the person, however many decisions were refused.
    let inbox = common::pap_at(p.root())
        .args(["inbox", "--json"])
        .output()
        .unwrap();
    let messages: Vec<Value> = common::stdout(&inbox)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|m: &Value| m["kind"] == "budget.exceeded")
        .collect();
    assert_eq!(messages.len(), 1, "{}", common::stdout(&inbox));
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("3 of 3 invocations"),
        "{}",
        messages[0]
    );
    // 24 hours after the first three, the budget is back.
    let later = p.events(
        "later.ndjson",
        &[ev("e4", "test.llm.asked", json!({"n": 4}))],
    );
    let run = p.dispatch("2026-03-12T06:00:00.001Z", &later, &["--no-run"]);
    assert_eq!(run.outcome("e4", "first"), "queued");
}

#[test]
fn a_token_budget_is_reserved_when_a_run_starts_so_runs_together_cannot_overspend() {
    // Each run may take 2 turns of at most 100 tokens: it reserves 200 of the day's 300.
    let fake = FakeLlm::start(vec![
        Scripted::ok(anthropic_text("first")),
        Scripted::ok(anthropic_text("second")),
    ]);
    let p = common::llm::project(
        &format!(
            "  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"{}\"\n    max_tokens: 100\n  limits:\n    max_tool_calls: 1\n  budget:\n    tokens_per_day: 300\n",
            fake.url
        ),
        None,
    );
    let file = p.events(
        "two.ndjson",
        &[
            ev("e1", "test.llm.asked", json!({})),
            ev("e2", "test.llm.asked", json!({})),
        ],
    );
    let out = p
        .cmd(T0)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(["dispatch", "--json", "-j", "2"])
        .arg(&file)
        .output()
        .unwrap();
    let run = run_of(&out);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    // One ran (and used 120 tokens); the other could not reserve 200 beside it, nor after it.
    assert_eq!(fake.requests().len(), 1);
    let results: Vec<(String, Option<String>)> = ["e1", "e2"]
        .iter()
        .map(|e| {
            let t = run.trigger(e, "t-llm");
            (
                t["outcome"].as_str().unwrap().to_owned(),
                t["reason"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let waiting = results
        .iter()
        .find(|(outcome, _)| outcome == "queued")
        .expect("one run waits");
    let why = waiting.1.as_deref().unwrap();
    assert!(
        why.contains(
            "waiting for the token budget: a run reserves 200 tokens, and 120 of agent a's 300"
        ) && why.contains("room at 2026-03-12T06:00:00.000Z"),
        "{why}"
    );
    // A day later serve runs it: the first run's tokens have left the window.
    serve_once(&p, "2026-03-12T06:00:01Z");
    assert_eq!(fake.requests().len(), 2);
    let statuses: Vec<String> = p
        .invocations()
        .iter()
        .map(|i| i["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["succeeded", "succeeded"]);
}

/// Prices of `test-model`: 3 per million input tokens, 15 per million output, 0.30 cached.
const PRICES: &str =
    "prices:\n  anthropic:\n    test-model: {input: 3.0, output: 15.0, cached_input: 0.30}\n";

#[test]
fn a_money_budget_refuses_a_run_that_would_exceed_it_and_runs_show_what_they_cost() {
    // The first run reads 80 of its 100 input tokens from the prompt cache:
    // 20 × 3 + 80 × 0.30 + 20 × 15 = 384 micros (0.000384 USD).
    let mut cached = anthropic_text("first");
    cached["usage"] =
        json!({"input_tokens": 20, "cache_read_input_tokens": 80, "output_tokens": 20});
    let fake = FakeLlm::start(vec![
        Scripted::ok(cached),
        Scripted::ok(anthropic_text("second")),
    ]);
    // A run may take 2 turns of 100 tokens: it reserves 200 tokens at the dearest rate (15 per
    // million), 0.003 USD, of the day's 0.0033.
    let p = common::llm::project(
        &format!(
            "  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"{}\"\n    max_tokens: 100\n  limits:\n    max_tool_calls: 1\n  budget:\n    usd_per_day: 0.0033\n",
            fake.url
        ),
        None,
    );
    let config = p.root().join("pap.yaml");
    let mut yaml = std::fs::read_to_string(&config).unwrap();
    yaml.push_str(PRICES);
    std::fs::write(&config, yaml).unwrap();
    let lint = common::pap_at(p.root()).arg("lint").output().unwrap();
    assert_eq!(common::code(&lint), 0, "{}", common::stderr(&lint));

    let file = p.events(
        "two.ndjson",
        &[
            ev("e1", "test.llm.asked", json!({})),
            ev("e2", "test.llm.asked", json!({})),
        ],
    );
    let out = p
        .cmd(T0)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(["dispatch", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    let run = run_of(&out);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    // One ran and cost 0.000384 (which one is the store's order: redb decides in file order,
    // PostgreSQL may start either first); the other would reserve 0.003 beside it, past
    // 0.0033: it waits.
    assert_eq!(fake.requests().len(), 1);
    let status_of = |e: &str| -> String {
        p.invocations()
            .iter()
            .find(|i| i["event_id"] == e)
            .map(|i| i["status"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let (ran, waits) = match status_of("e1").as_str() {
        "succeeded" => ("e1", "e2"),
        _ => ("e2", "e1"),
    };
    assert_eq!(
        (status_of(ran), status_of(waits)),
        ("succeeded".into(), "queued".into())
    );
    let why = run.trigger(waits, "t-llm")["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.contains("waiting for the money budget: a run reserves 0.003000 USD, and 0.000384 of agent a's 0.003300 USD")
            && why.contains("room at 2026-03-12T06:00:00.000Z"),
        "{why}"
    );
    // What the run cost, in the JSON and in `invocations show`.
    let first = p
        .invocations()
        .into_iter()
        .find(|i| i["event_id"] == ran)
        .unwrap();
    assert_eq!(
        first["cost"],
        json!({"currency": "USD", "amount": "0.000384", "micros": 384})
    );
    let id = first["id"].as_str().unwrap();
    let show = common::pap_at(p.root())
        .args(["invocations", "show", id])
        .output()
        .unwrap();
    let text = common::stdout(&show);
    assert!(
        text.contains("tokens in 100 (cached 80) out 20 · cost 0.000384 USD"),
        "{text}"
    );
    // An hour later serve still leaves the other waiting: 0.000384 spent and 0.003 more is past
    // 0.0033 until e1's spending leaves the 24 hours.
    serve_once(&p, "2026-03-11T07:00:00Z");
    assert_eq!(fake.requests().len(), 1, "e2 still does not fit");
}

/// `pap serve --once` at `at`, with a provider key.
fn serve_once(p: &Project, at: &str) {
    let out = p
        .cmd(at)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(["serve", "--once"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
}

#[test]
fn a_money_budget_without_the_models_price_is_a_warning_and_refuses_its_runs() {
    let p = common::llm::project(
        "  risk_level: low\n  model:\n    provider: anthropic\n    model_id: unpriced-model\n    max_tokens: 100\n  limits:\n    max_tool_calls: 1\n  budget:\n    usd_per_day: 1\n",
        None,
    );
    let lint = common::pap_at(p.root()).arg("lint").output().unwrap();
    let text = common::stderr(&lint) + &common::stdout(&lint);
    assert_eq!(common::code(&lint), 0, "a warning: {text}");
    assert!(text.contains("unpriced-model"), "{text}");
    let file = p.events("one.ndjson", &[ev("e1", "test.llm.asked", json!({}))]);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.outcome("e1", "t-llm"), "budget_exceeded");
    let why = run.trigger("e1", "t-llm")["reason"].as_str().unwrap();
    assert!(why.contains("has no price in pap.yaml"), "{why}");
}

/// The stage order: filter, idempotency, cascade, debounce, throttle, budget, risk.
#[test]
fn the_stages_run_in_order_with_the_extensions() {
    let p = common::llm::project(
        "  risk_level: low\n  model:\n    provider: command\n    command: [\"true\"]\n  budget:\n    invocations_per_day: 10\n",
        None,
    );
    std::fs::write(
        p.root().join("triggers/t-llm.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-llm\n  match:\n    type: test.llm.asked\n  debounce: {seconds: 60, mode: leading}\n  throttle:\n    - {max_per_window: 5, window_seconds: 3600}\n  agent: a\n",
    )
    .unwrap();
    let file = p.events("one.ndjson", &[ev("e1", "test.llm.asked", json!({}))]);
    let run = p.dispatch(T0, &file, &["--dry-run", "--explain"]);
    let stages: Vec<String> = run.trigger("e1", "t-llm")["explain"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        stages,
        [
            "filter",
            "idempotency",
            "cascade",
            "debounce",
            "throttle",
            "budget",
            "risk"
        ]
    );
}
