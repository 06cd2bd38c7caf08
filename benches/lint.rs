//! Benchmark: `pap lint`'s load-and-check of 1,000 generated manifests (500 triggers, 500
//! agents), against a baseline in the same process: plain serde-saphyr deserialization of the
//! same files into the raw types, with no checks. The ratio is the price of checking everything
//! with positions.
//!
//! Run: `cargo bench --bench lint`

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use pap::manifest::raw::{AgentFile, TriggerFile};
use pap::manifest::{discover, loader};

const PAIRS: usize = 500;
const ROUNDS: usize = 7;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    generate(dir.path());

    let mut lint_times = Vec::new();
    let mut parse_times = Vec::new();
    for _ in 0..ROUNDS {
        lint_times.push(time(|| {
            let loaded = loader::load(dir.path(), &[]);
            assert!(
                loaded.project.is_some(),
                "generated project must lint clean"
            );
            assert!(loaded.diagnostics.is_empty());
        }));
        parse_times.push(time(|| baseline(dir.path())));
    }
    let lint = median(&mut lint_times);
    let parse = median(&mut parse_times);
    let n = PAIRS * 2;
    println!("lint of {n} generated manifests (median of {ROUNDS} rounds)");
    println!(
        "  pap lint (load, schema check, compile, cross-file): {:>8.2} ms  ({:.1} µs per manifest)",
        ms(lint),
        lint.as_secs_f64() * 1e6 / n as f64
    );
    println!(
        "  baseline: serde-saphyr into raw types, no checks:   {:>8.2} ms  ({:.1} µs per manifest)",
        ms(parse),
        parse.as_secs_f64() * 1e6 / n as f64
    );
    println!(
        "  ratio lint / baseline: {:.2}x",
        lint.as_secs_f64() / parse.as_secs_f64()
    );
}

fn baseline(root: &Path) {
    for (dir, is_trigger) in [("triggers", true), ("agents", false)] {
        let mut files = Vec::new();
        let rules = discover::Rules {
            root,
            follow_outside: false,
        };
        discover::walk_yaml(&root.join(dir), rules, &mut files);
        for f in files {
            let text = std::fs::read_to_string(f.path()).expect("read");
            if is_trigger {
                serde_saphyr::from_str::<TriggerFile>(&text).expect("trigger parses");
            } else {
                serde_saphyr::from_str::<AgentFile>(&text).expect("agent parses");
            }
        }
    }
}

fn generate(root: &Path) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("pap.yaml"),
        "pap_version: \"0.2\"\nmcp_servers:\n  files:\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]\n",
    )
    .unwrap();
    for i in 0..PAIRS {
        std::fs::write(
            root.join(format!("triggers/t{i:04}.yaml")),
            format!(
                "pap_version: \"0.2\"\ntrigger:\n  id: trigger-{i}\n  description: generated trigger {i}\n  match:\n    type: \"domain{d}.object.threshold_exceeded\"\n  filter:\n    - path: $.data.value\n      operator: gt\n      value: {i}.5\n    - path: $.data.region\n      operator: in\n      value: [NO1, NO2, SE3]\n    - path: $.source\n      operator: regex\n      value: \"^monitoring\\\\.[a-z-]+$\"\n  throttle:\n    max_per_window: 2\n    window_seconds: 3600\n    window_key: $.data.region\n  agent: agent-{i}\n",
                d = i % 50
            ),
        )
        .unwrap();
        std::fs::write(
            root.join(format!("agents/a{i:04}.yaml")),
            format!(
                "pap_version: \"0.2\"\nagent:\n  id: agent-{i}\n  description: generated agent {i}\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: claude-sonnet-4-20250514\n    max_tokens: 1000\n    temperature: 0.2\n  system_prompt: |\n    You are generated agent {i}. Read the event and write a short assessment.\n  tools:\n    - name: read_text_file\n      source: mcp://files\n      risk_override: read_only\n      impact: internal\n  limits:\n    max_runtime_seconds: 60\n    max_tool_calls: 5\n  output:\n    type: structured\n    schema:\n      summary: string\n      severity: integer\n  on_complete:\n    emit_event: pap.agent.invocation.completed\n  on_failure:\n    retry:\n      max_attempts: 3\n      backoff_seconds: 2\n    emit_event: pap.agent.invocation.failed\n"
            ),
        )
        .unwrap();
    }
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
