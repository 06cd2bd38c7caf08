//! Spool files written in place are claimed only once their writer closed them and they
//! settled; renamed-in files at once; entries serve never takes are logged once and never
//! opened.

use std::io::Write;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use crate::common::dispatch::ev;
use crate::common::serve::{Project, wait_until};
use serde_json::json;

fn with_settle(p: &Project, settle: &str) {
    let config = p.root().join("pap.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(
        "  rescan_interval: 1s\n",
        &format!("  rescan_interval: 1s\n  spool_settle: {settle}\n"),
    );
    std::fs::write(&config, text).unwrap();
}

fn line(id: &str) -> String {
    format!("{}\n", ev(id, "test.quick.happened", json!({})))
}

/// Whether this file system tells open writers by leases (Linux local file systems do; NFS and
/// some FUSE mounts do not, and there the settle time alone decides).
fn leases_work(dir: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let path = dir.join(".lease-probe");
    let writer = std::fs::File::create(&path).unwrap();
    let reader = std::fs::File::open(&path).unwrap();
    // SAFETY: fcntl on descriptors owned here, integer arguments only.
    let set = unsafe {
        nix::libc::fcntl(
            reader.as_raw_fd(),
            nix::libc::F_SETLEASE,
            nix::libc::F_RDLCK,
        )
    };
    let refused =
        set != 0 && std::io::Error::last_os_error().raw_os_error() == Some(nix::libc::EAGAIN);
    drop((writer, reader));
    let _ = std::fs::remove_file(&path);
    refused
}

#[test]
fn a_file_written_in_place_is_claimed_after_its_writer_closed_it() {
    let p = Project::new();
    if !leases_work(p.root()) {
        crate::common::skip_note("an open writer cannot be told on this file system (no leases)");
        return;
    }
    with_settle(&p, "1s");
    let serve = p.serve(&[]);
    let path = p.spool().join("inplace.ndjson");
    let mut writer = std::fs::File::create(&path).unwrap();
    writer.write_all(line("w1").as_bytes()).unwrap();
    writer.flush().unwrap();
    // Well past the settle time, but still open: not claimed.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(path.exists(), "claimed while its writer still had it open");
    writer.write_all(line("w2").as_bytes()).unwrap();
    drop(writer);
    wait_until("the file in done/", || {
        p.files_in("done") == ["inplace.ndjson"]
    });
    // Both lines were decided.
    wait_until("both events invoked", || {
        !p.invocations_of("w1").is_empty() && !p.invocations_of("w2").is_empty()
    });
    assert_eq!(serve.terminate().0, 0);
}

#[test]
fn a_renamed_file_is_claimed_at_once_and_an_unsettled_one_waits() {
    let p = Project::new();
    // A settle time far longer than the test: only a rename can be claimed in time.
    with_settle(&p, "1h");
    let serve = p.serve(&[]);
    std::fs::write(p.spool().join("inplace.ndjson"), line("i1")).unwrap();
    let started = Instant::now();
    p.drop_file("renamed.ndjson", &line("r1"));
    wait_until("the renamed file in done/", || {
        p.files_in("done") == ["renamed.ndjson"]
    });
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        p.spool().join("inplace.ndjson").exists(),
        "an unsettled file was claimed"
    );
    assert_eq!(serve.terminate().0, 0);
}

#[test]
fn entries_serve_never_takes_are_logged_once_and_never_opened() {
    let p = Project::new();
    let spool = p.spool();
    std::fs::create_dir_all(&spool).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("e.json"), line("outside")).unwrap();
    symlink(outside.path().join("e.json"), spool.join("link.json")).unwrap();
    nix::unistd::mkfifo(&spool.join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::create_dir(spool.join("dir.json")).unwrap();
    std::fs::write(spool.join("notes.txt"), "hello").unwrap();
    let odd = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"bad-\xff.json");
    std::fs::write(spool.join(odd), line("odd")).unwrap();
    let serve = p.serve(&[]);
    p.drop_file("ok.json", &line("ok1"));
    wait_until("ok.json in done/", || p.files_in("done") == ["ok.json"]);
    // Several rescans (1 s each) later, each is still logged once.
    std::thread::sleep(Duration::from_millis(2500));
    let log = serve.log_text();
    for name in ["link.json", "fifo.json", "dir.json", "notes.txt", "bad-"] {
        let n = log
            .lines()
            .filter(|l| l.contains("spool entry ignored") && l.contains(name))
            .count();
        assert_eq!(n, 1, "{name}:\n{log}");
    }
    assert!(p.invocations_of("outside").is_empty());
    let (status, took) = serve.terminate();
    assert_eq!(status, 0);
    assert!(took < Duration::from_secs(15));
}
