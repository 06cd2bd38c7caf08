//! FIFOs, sockets and links in a project: refused with one diagnostic that quotes nothing,
//! never a hang; links are followed only to regular files inside the root.

use std::os::unix::fs::symlink;
use std::process::Output;
use std::time::{Duration, Instant};

use super::project;
use crate::common::dispatch::Project;
use crate::common::{code, pap_at, stderr, stdout};

fn mkfifo(path: &std::path::Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// Runs `pap ARGS` on the project, failing the test if it takes more than 20 s.
fn run(p: &Project, args: &[&str]) -> Output {
    let mut child = pap_at(p.root())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("pap {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_fifo_named_like_a_manifest_is_one_diagnostic_and_never_a_hang() {
    let p = project();
    mkfifo(&p.root().join("triggers/evil.yaml"));
    let lint = run(&p, &["lint"]);
    assert_eq!(code(&lint), 1, "{}", stdout(&lint));
    let text = stdout(&lint);
    assert!(text.contains("triggers/evil.yaml"), "{text}");
    assert!(text.contains("not a regular file (a FIFO)"), "{text}");
    assert_eq!(text.matches("unreadable-file").count(), 1, "{text}");
    // Read-only commands keep working (with a warning); deciding ones refuse, quickly.
    let list = run(&p, &["invocations"]);
    assert_eq!(code(&list), 0, "{}", stderr(&list));
    let file = p.events("e.ndjson", &[]);
    let dispatch = run(&p, &["dispatch", file.to_str().unwrap()]);
    assert_eq!(code(&dispatch), 1, "{}", stderr(&dispatch));
    // pap.yaml as a FIFO too.
    std::fs::remove_file(p.root().join("pap.yaml")).unwrap();
    mkfifo(&p.root().join("pap.yaml"));
    let lint = run(&p, &["lint"]);
    assert_eq!(code(&lint), 1);
    assert!(stdout(&lint).contains("pap.yaml"), "{}", stdout(&lint));
}

#[test]
fn a_link_out_of_the_project_is_not_followed_and_its_target_never_quoted() {
    let p = project();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id_rsa");
    std::fs::write(
        &secret,
        "-----BEGIN OPENSSH PRIVATE KEY----- s3cr3t-material\n",
    )
    .unwrap();
    symlink(&secret, p.root().join("triggers/leak.yaml")).unwrap();
    let lint = run(&p, &["lint", "--format", "json"]);
    let text = format!("{}{}", stdout(&lint), stderr(&lint));
    assert!(!text.contains("s3cr3t-material"), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert!(text.contains("outside the project root"), "{text}");
    assert_eq!(code(&lint), 1);
    let human = run(&p, &["lint"]);
    assert!(!stdout(&human).contains("s3cr3t"), "{}", stdout(&human));

    // A link inside the root is followed like the file itself.
    std::fs::remove_file(p.root().join("triggers/leak.yaml")).unwrap();
    std::fs::create_dir(p.root().join("shared")).unwrap();
    std::fs::rename(
        p.root().join("triggers/hourly.yaml"),
        p.root().join("shared/hourly.yaml"),
    )
    .unwrap();
    symlink(
        "../shared/hourly.yaml",
        p.root().join("triggers/hourly.yaml"),
    )
    .unwrap();
    let lint = run(&p, &["lint"]);
    assert_eq!(code(&lint), 0, "{}", stdout(&lint));

    // follow_symlinks: true lifts the root rule for layouts that need it.
    let shared = tempfile::tempdir().unwrap();
    std::fs::copy(
        p.root().join("shared/hourly.yaml"),
        shared.path().join("hourly.yaml"),
    )
    .unwrap();
    std::fs::remove_file(p.root().join("triggers/hourly.yaml")).unwrap();
    symlink(
        shared.path().join("hourly.yaml"),
        p.root().join("triggers/hourly.yaml"),
    )
    .unwrap();
    assert_eq!(code(&run(&p, &["lint"])), 1);
    std::fs::write(
        p.root().join("pap.yaml"),
        "pap_version: \"0.2\"\nfollow_symlinks: true\n",
    )
    .unwrap();
    let lint = run(&p, &["lint"]);
    assert_eq!(code(&lint), 0, "{}", stdout(&lint));
}

#[test]
fn a_manifest_folder_that_is_a_link_out_and_links_to_hidden_files_are_refused() {
    let p = project();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("hosts.yml"),
        "oauth_token: gho_s3cr3t-token\n",
    )
    .unwrap();
    std::fs::create_dir(p.root().join("schedules-out")).unwrap();
    symlink(outside.path(), p.root().join("schedules")).unwrap();
    std::fs::create_dir(p.root().join(".git")).unwrap();
    std::fs::write(
        p.root().join(".git/config"),
        "extraheader = AUTHORIZATION: basic c2VjcmV0\n",
    )
    .unwrap();
    symlink("../.git/config", p.root().join("triggers/ci.yaml")).unwrap();
    let lint = run(&p, &["lint"]);
    let text = format!("{}{}", stdout(&lint), stderr(&lint));
    assert_eq!(code(&lint), 1, "{text}");
    assert!(
        !text.contains("s3cr3t") && !text.contains("c2VjcmV0"),
        "{text}"
    );
    assert!(
        text.contains("schedules") && text.contains("outside the project root"),
        "{text}"
    );
    assert!(
        text.contains("triggers/ci.yaml") && text.contains("hidden"),
        "{text}"
    );
}

#[test]
fn a_directory_link_loop_is_one_diagnostic() {
    let p = project();
    symlink(".", p.root().join("triggers/again")).unwrap();
    symlink("../agents", p.root().join("triggers/agents-too")).unwrap();
    let lint = run(&p, &["lint"]);
    let text = stdout(&lint);
    assert!(text.matches("a loop").count() == 1, "{text}");
    // The loop costs one diagnostic, not one per file per turn around it.
    assert_eq!(text.matches("unreadable-file").count(), 1, "{text}");
}

#[test]
fn a_fifo_appearing_under_a_running_serve_is_refused_and_serve_still_stops() {
    let p = crate::common::serve::Project::new();
    let serve = p.serve(&[]);
    mkfifo(&p.root().join("triggers/evil.yaml"));
    crate::common::serve::wait_until("the reload refused", || {
        serve.log_text().contains("unreadable-file")
    });
    let (status, took) = serve.terminate();
    assert_eq!(status, 0);
    assert!(took < Duration::from_secs(15), "{took:?}");
}
