//! A damaged store is a clear error, never a panic, and never silently replaced; `pap store
//! check` verifies a store and `pap store backup` copies one while others use it.

use std::path::Path;

use crate::common::dispatch::{Project, T0, ev};
use crate::common::{code, stderr, stdout};
use serde_json::json;

fn project_with_state(n: usize) -> Project {
    let p = super::project();
    let events: Vec<_> = (0..n)
        .map(|i| ev(&format!("e{i}"), "test.key.collided", json!({"i": i})))
        .collect();
    let file = p.events("events.ndjson", &events);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    p
}

fn state(p: &Project) -> std::path::PathBuf {
    p.root().join(".pap/state.redb")
}

#[test]
fn a_zero_byte_store_is_an_error_not_a_fresh_start() {
    let p = project_with_state(3);
    std::fs::write(state(&p), b"").unwrap();
    let file = p.events("again.ndjson", &[ev("e0", "test.key.collided", json!({}))]);
    let out = p
        .cmd(T0)
        .args(["dispatch", "--no-run"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("is damaged: the file is empty (0 bytes)"),
        "{err}"
    );
    assert!(err.contains("pap store backup"), "{err}");
    assert_eq!(
        std::fs::metadata(state(&p)).unwrap().len(),
        0,
        "left as it was"
    );
}

#[test]
fn flipped_bytes_never_panic_and_store_check_finds_them() {
    let p = project_with_state(400);
    let sound = p.cmd(T0).args(["store", "check"]).output().unwrap();
    assert_eq!(code(&sound), 0, "{}{}", stdout(&sound), stderr(&sound));
    assert!(
        stdout(&sound).contains("800 invocations"),
        "{}",
        stdout(&sound)
    );

    let original = std::fs::read(state(&p)).unwrap();
    let mut damaged_seen = 0;
    // Every 4 KiB page of the file, a burst of flipped bytes in the middle of it.
    for page in 0..original.len() / 4096 {
        let mut bytes = original.clone();
        for b in &mut bytes[page * 4096 + 1000..page * 4096 + 1064] {
            *b ^= 0x5a;
        }
        std::fs::write(state(&p), &bytes).unwrap();
        for args in [&["invocations", "--json"][..], &["store", "check"][..]] {
            let out = p.cmd(T0).args(args).output().unwrap();
            let err = stderr(&out);
            assert!(
                code(&out) == 0 || code(&out) == 1,
                "page {page}, {args:?}: exit {:?}: {err}",
                out.status.code()
            );
            assert!(
                !err.contains("panicked") && !err.contains("internal error"),
                "{err}"
            );
            if code(&out) == 1 {
                let said = format!("{err}{}", stdout(&out));
                assert!(
                    said.contains("damaged") || said.contains("is corrupt"),
                    "{said}"
                );
                assert!(
                    said.contains("pap store") || said.contains("bad record"),
                    "{said}"
                );
                damaged_seen += 1;
            }
        }
    }
    assert!(damaged_seen > 0, "no flip was noticed");
}

#[test]
fn backup_is_consistent_while_a_dispatch_writes() {
    let p = project_with_state(10);
    let events: Vec<_> = (0..3000)
        .map(|i| ev(&format!("b{i}"), "test.key.collided", json!({})))
        .collect();
    let file = p.events("many.ndjson", &events);
    let mut writer = p
        .cmd(T0)
        .args(["dispatch", "--no-run", "--json"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let copy = p.root().join("backup.redb");
    let out = p
        .cmd(T0)
        .args(["store", "backup"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(writer.wait().unwrap().success());

    // The copy is a store of its own: sound, and holding whole transactions only.
    let restored = tempfile::tempdir().unwrap();
    std::fs::copy(&copy, restored.path().join("state.redb")).unwrap();
    let state_arg = |cmd: &mut std::process::Command| {
        cmd.arg("--state").arg(restored.path());
    };
    let mut check = p.cmd(T0);
    state_arg(&mut check);
    let out = check.args(["store", "check", "--json"]).output().unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["ok"], true);
    // 10 events before, then whole groups of the 3,000: two invocations per event.
    let n = report["invocations"].as_u64().unwrap();
    assert!(n >= 20 && n.is_multiple_of(2), "{report}");

    // A second backup to the same file needs --force.
    let again = p
        .cmd(T0)
        .args(["store", "backup"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(code(&again), 1);
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    assert!(Path::new(&copy).exists());
}

/// Says the store's trouble once, on one line without runs of spaces: each cause once, and a
/// file that is not (or no longer) what redb wrote is "damaged" with the restore advice.
fn said_once(err: &str, cause: &str) {
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("  "), "a run of spaces: {err}");
    assert_eq!(
        err.matches(cause).count(),
        1,
        "{cause:?} not said once: {err}"
    );
}

#[test]
fn a_store_overwritten_or_cut_short_is_damaged_and_said_once() {
    let p = project_with_state(50);
    let original = std::fs::read(state(&p)).unwrap();
    let list = |p: &Project| p.cmd(T0).args(["invocations", "--json"]).output().unwrap();

    // Another file's first bytes in its place.
    let mut bytes = original.clone();
    bytes[..8].copy_from_slice(b"XXXXXXXX");
    std::fs::write(state(&p), &bytes).unwrap();
    let out = list(&p);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("is damaged: it is not a redb file"), "{err}");
    assert!(err.contains("pap store backup"), "{err}");
    assert!(!err.contains("I/O error"), "{err}");
    said_once(&err, "magic number");

    // Cut short, at several lengths.
    for len in [100, 5000, original.len() / 2] {
        std::fs::write(state(&p), &original[..len]).unwrap();
        let out = list(&p);
        assert_eq!(code(&out), 1, "{len} bytes");
        let err = stderr(&out);
        assert!(err.contains("is damaged"), "{len} bytes: {err}");
        assert!(err.contains("pap store backup"), "{err}");
        said_once(&err, "is damaged");
    }
}

#[test]
fn a_full_disk_is_said_once() {
    // A small file system of its own for the state dir: a tmpfs mounted in a user and mount
    // namespace (`unshare -rm`), which needs no privilege where user namespaces are allowed.
    let probe = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("PAP_TEST_REQUIRE_NAMESPACES").is_none(),
            "PAP_TEST_REQUIRE_NAMESPACES is set but `unshare -rm` cannot mount a tmpfs"
        );
        crate::common::skip_note(
            "the full-disk message: `unshare -rm` cannot mount a tmpfs here (user namespaces)",
        );
        return;
    }
    let p = super::project();
    let events: Vec<_> = (0..2000)
        .map(|i| {
            ev(
                &format!("f{i}"),
                "test.key.collided",
                json!({"pad": "x".repeat(200)}),
            )
        })
        .collect();
    let file = p.events("many.ndjson", &events);
    let state_dir = p.root().join(".pap");
    std::fs::create_dir_all(&state_dir).unwrap();
    let pap = p.cmd(T0).get_program().to_owned();
    let script = format!(
        "mount -t tmpfs -o size=256k tmpfs '{}' && exec '{}' --root '{}' dispatch --no-run '{}'",
        state_dir.display(),
        Path::new(&pap).display(),
        p.root().display(),
        file.display()
    );
    let out = p
        .cmd(T0)
        .get_envs()
        .fold(std::process::Command::new("unshare"), |mut c, (k, v)| {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
            c
        })
        .args(["-rm", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("No space left on device"), "{err}");
    said_once(&err, "No space left on device");
}
