//! Spool files written in place are claimed only once their writer closed them and they
//! settled; renamed-in files at once; entries serve never takes are logged once and never
//! opened; the spool's own directories are never followed when they are links (one that is
//! a link at start stops serve; one that turns into a link is left alone and shown), and
//! retention deletes only what pap filed.

use std::io::Write;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use crate::common::dispatch::ev;
use crate::common::serve::{Project, wait_until};
use serde_json::json;

/// Adds `setting` (`KEY: VALUE`) to the serve fixture's `serve:` section.
fn with_serve_setting(p: &Project, setting: &str) {
    let config = p.root().join("pap.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(
        "  rescan_interval: 1s\n",
        &format!("  rescan_interval: 1s\n  {setting}\n"),
    );
    std::fs::write(&config, text).unwrap();
}

fn with_settle(p: &Project, settle: &str) {
    with_serve_setting(p, &format!("spool_settle: {settle}"));
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

// --- spool directories that are links -------------------------------------

/// A directory outside the spool, with a file that looks like an event file and one that
/// is old (past any retention): what serve must never touch.
struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Outside {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.json"), "outside, keep me\n").unwrap();
        std::fs::write(dir.path().join("old.json"), "outside, old\n").unwrap();
        age(&dir.path().join("old.json"), 40);
        Outside { dir }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Every name and its contents: unchanged when nothing touched the directory.
    fn contents(&self) -> Vec<(String, String)> {
        let mut found: Vec<_> = std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                (e.file_name().to_string_lossy().into_owned(), text)
            })
            .collect();
        found.sort();
        found
    }
}

/// Sets `path`'s modification time `days` back.
fn age(path: &std::path::Path, days: u64) {
    let then = std::time::SystemTime::now() - Duration::from_secs(days * 86_400);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(then)
        .unwrap();
}

#[test]
fn a_spool_directory_that_is_a_link_stops_serve_at_start_naming_it() {
    for sub in ["done", "failed", "processing"] {
        let p = Project::new();
        let spool = p.spool();
        std::fs::create_dir_all(&spool).unwrap();
        let outside = Outside::new();
        let before = outside.contents();
        symlink(outside.path(), spool.join(sub)).unwrap();
        // A ready file of the name the outside directory has: a claim through the link
        // would replace it. With a bad line, so it would be filed in failed/.
        std::fs::write(spool.join("keep.json"), format!("{}not json\n", line("k1"))).unwrap();
        let out = p.cmd().args(["serve", "--once"]).output().unwrap();
        let err = crate::common::stderr(&out);
        assert_ne!(crate::common::code(&out), 0, "{sub}: serve started:\n{err}");
        let named = spool.join(sub);
        assert!(
            err.contains(&named.display().to_string()) && err.contains("symbolic link"),
            "{sub}: the error names {}:\n{err}",
            named.display()
        );
        assert_eq!(
            outside.contents(),
            before,
            "{sub}: the outside directory changed"
        );
        assert!(
            spool.join("keep.json").exists(),
            "{sub}: the ready file was taken"
        );
        assert!(p.invocations_of("k1").is_empty());
    }
}

#[test]
fn a_spool_directory_turned_into_a_link_while_serve_runs_is_left_alone_and_shown() {
    use crate::common::http::{curl, curl_available, post, serve};
    if !curl_available() {
        return;
    }
    let p = Project::new();
    let (serve, url) = serve(&p, &[], &[]);
    p.drop_file("a.ndjson", &line("a1"));
    wait_until("a.ndjson in done/", || p.files_in("done") == ["a.ndjson"]);
    let spool = p.spool();
    let outside = Outside::new();
    let before = outside.contents();
    // processing/ becomes a link to the outside directory, in one step.
    let link = spool.join("processing.link");
    symlink(outside.path(), &link).unwrap();
    crate::common::exchange(&spool.join("processing"), &link);
    p.drop_file("keep.json", &line("k1"));
    let status = || p.cmd().arg("status").output().unwrap();
    wait_until("pap status to show the spool condition", || {
        let out = status();
        crate::common::code(&out) == 5 && crate::common::stdout(&out).contains("processing")
    });
    let shown = crate::common::stdout(&status());
    assert!(
        shown.contains("symbolic link") && shown.contains("spool files are not taken"),
        "{shown}"
    );
    let condition = || {
        let text = curl(&[&format!("{url}/metrics")], None).body;
        text.lines()
            .find(|l| l.starts_with("pap_serve_condition{condition=\"spool\"}"))
            .map(|l| l.rsplit(' ').next().unwrap().to_owned())
    };
    assert_eq!(condition().as_deref(), Some("1"));
    // HTTP events are still decided.
    let reply = post(
        &format!("{url}/v1/events"),
        "application/json",
        ev("h1", "test.quick.happened", json!({}))
            .to_string()
            .as_bytes(),
        &[],
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    wait_until("the posted event invoked", || {
        !p.invocations_of("h1").is_empty()
    });
    // Several retries later, nothing moved: the file waits in the spool, the outside is as
    // it was.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(spool.join("keep.json").exists(), "the file was claimed");
    assert_eq!(outside.contents(), before, "the outside directory changed");
    assert!(p.invocations_of("k1").is_empty());
    // The operator puts the directory back: serve takes the file and says so.
    crate::common::exchange(&spool.join("processing"), &link);
    wait_until("keep.json in done/", || {
        p.files_in("done") == ["a.ndjson", "keep.json"]
    });
    wait_until("the condition to end", || {
        condition().as_deref() == Some("0")
    });
    assert_eq!(crate::common::code(&status()), 0);
    assert_eq!(outside.contents(), before);
    let log = serve.log_text();
    let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("spool files are not taken"), 1, "logged once:\n{log}");
    assert_eq!(count("spool files are taken again"), 1, "{log}");
    assert_eq!(serve.terminate().0, 0);
}

#[test]
fn a_spool_directory_that_is_itself_a_link_is_resolved_once_and_logged() {
    let p = Project::new();
    let other_disk = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(p.root().join(".pap")).unwrap();
    symlink(other_disk.path(), p.spool()).unwrap();
    std::fs::write(other_disk.path().join("a.ndjson"), line("r1")).unwrap();
    let out = p.cmd().args(["serve", "--once"]).output().unwrap();
    let err = crate::common::stderr(&out);
    assert_eq!(crate::common::code(&out), 0, "{err}");
    assert!(other_disk.path().join("done/a.ndjson").exists(), "{err}");
    assert_eq!(p.invocations_of("r1").len(), 1);
    let resolved = other_disk.path().canonicalize().unwrap();
    let logged: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("the spool directory is a link"))
        .collect();
    assert_eq!(logged.len(), 1, "{err}");
    assert!(logged[0].contains(&resolved.display().to_string()), "{err}");
}

#[test]
fn retention_deletes_only_regular_files_pap_wrote() {
    let p = Project::new();
    with_serve_setting(&p, "done_retention: 1d");
    let done = p.spool().join("done");
    std::fs::create_dir_all(&done).unwrap();
    let outside = Outside::new();
    let before = outside.contents();
    // Past the retention, and pap's: a claimed file's name, and a second one of that name.
    for name in ["old.json", "old.ndjson.3"] {
        std::fs::write(done.join(name), "{}\n").unwrap();
        age(&done.join(name), 40);
    }
    // Kept: a recent file; old files whose names pap never writes; a link (to an old file
    // outside); a directory; a FIFO.
    std::fs::write(done.join("new.json"), "{}\n").unwrap();
    for name in ["notes.txt", "README", ".hidden.json", "x.json.tmp"] {
        std::fs::write(done.join(name), "mine\n").unwrap();
        age(&done.join(name), 40);
    }
    symlink(outside.path().join("old.json"), done.join("link.json")).unwrap();
    std::fs::create_dir(done.join("sub.json")).unwrap();
    std::fs::write(done.join("sub.json/inner.json"), "{}\n").unwrap();
    age(&done.join("sub.json/inner.json"), 40);
    nix::unistd::mkfifo(&done.join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = p.cmd().args(["serve", "--once"]).output().unwrap();
    assert_eq!(
        crate::common::code(&out),
        0,
        "{}",
        crate::common::stderr(&out)
    );
    let mut left: Vec<String> = std::fs::read_dir(&done)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ".hidden.json",
            "README",
            "fifo.json",
            "link.json",
            "new.json",
            "notes.txt",
            "sub.json",
            "x.json.tmp"
        ]
    );
    assert!(done.join("sub.json/inner.json").exists());
    assert_eq!(outside.contents(), before);
}
