//! What a shell user expects of a CLI: completions that the shell accepts, a man page,
//! `--color`, and duration flags in the YAML's syntax.

use crate::common;

use common::dispatch::{Project, T0, ev};
use common::{code, pap, stderr, stdout};
use serde_json::json;

#[test]
fn bash_accepts_the_generated_completions_and_every_shell_gets_a_script() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = pap().args(["completions", shell]).output().unwrap();
        assert_eq!(code(&out), 0, "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains("invocations"), "{shell}: {script}");
    }
    let out = pap().args(["completions", "bash"]).output().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pap.bash");
    std::fs::write(&file, &out.stdout).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .expect("bash is part of the test machine");
    assert!(checked.status.success(), "{}", stderr(&checked));
    // The subcommands and their flags are completed.
    let script = stdout(&out);
    assert!(
        script.contains("retry") && script.contains("--trigger"),
        "{script}"
    );
}

#[test]
fn the_man_page_is_roff_with_every_command() {
    let out = pap().arg("man").output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let page = stdout(&out);
    assert!(
        page.starts_with(".ie") || page.contains(".TH pap"),
        "{page}"
    );
    for command in ["dispatch", "serve", "invocations", "status", "completions"] {
        assert!(page.contains(command), "{command} missing");
    }
}

#[test]
fn color_follows_the_flag_and_no_color() {
    let p = Project::new();
    let inv = p.awaiting("c1");
    let list = |args: &[&str], env: Option<&str>| {
        let mut cmd = p.cmd(T0);
        cmd.env_remove("NO_COLOR");
        if let Some(v) = env {
            cmd.env("NO_COLOR", v);
        }
        stdout(&cmd.args(args).output().unwrap())
    };
    assert!(list(&["--color", "always", "invocations"], None).contains("\x1b[33m"));
    assert!(!list(&["--color", "never", "invocations"], None).contains('\x1b'));
    // auto: stdout is a pipe here, so no colour; NO_COLOR never colours on auto.
    assert!(!list(&["invocations"], None).contains('\x1b'));
    assert!(!list(&["--color", "auto", "invocations"], Some("1")).contains('\x1b'));
    assert!(list(&["invocations"], None).contains(&inv[16..22]));
}

#[test]
fn duration_flags_take_the_yaml_syntax_and_seconds() {
    let p = Project::new();
    let file = p.events("g.ndjson", &[ev("g1", "test.basic.happened", json!({}))]);
    for grace in ["10s", "1m30s", "2.5"] {
        let run = p.dispatch(T0, &file, &["--grace", grace, "--dry-run"]);
        assert_eq!(run.code, 0, "--grace {grace}: {}", run.stderr);
    }
    let run = p.dispatch(T0, &file, &["--grace", "10x"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("unknown unit"), "{}", run.stderr);
    // Absurd values are refused, not a panic or an overflow later.
    for absurd in ["1e20", "400d", "-1"] {
        let run = p.dispatch(T0, &file, &["--grace", absurd]);
        assert_eq!(run.code, 2, "--grace {absurd}: {}", run.stderr);
    }
}

#[test]
fn every_error_starts_with_error_and_is_said_once() {
    let p = common::dispatch::Project::new();
    let cases: &[&[&str]] = &[
        &["inbox", "ack", "999"],
        &["dispatch", "missing.ndjson"],
        &["invocations", "show", "inv_nothing"],
        &["approve", "inv_nothing"],
    ];
    for args in cases {
        let out = p.cmd(common::dispatch::T0).args(*args).output().unwrap();
        assert_ne!(common::code(&out), 0, "{args:?}");
        let err = common::stderr(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert!(!lines.is_empty(), "{args:?}: nothing said");
        for l in &lines {
            assert!(l.starts_with("error: "), "{args:?}: {err}");
        }
        let first = lines[0];
        assert_eq!(err.matches(first).count(), 1, "{args:?}: said twice: {err}");
    }
}
