//! Fuzz targets for what pap reads from outside: the event parser (bytes from a sender), the
//! JSONPath evaluator (hostile paths over hostile events) and the manifest loader (YAML).
//!
//! Coverage-guided fuzzing needs nightly Rust (cargo-fuzz) or a toolchain of its own, which
//! this project's machines cannot install, so the targets are property-based (proptest), with
//! generators shaped for each input (JSON with duplicate members, control characters and deep
//! nesting; paths built from every RFC 9535 construct; YAML mutated from real manifests).
//!
//! Every target checks: no panic, no input slower than a bound, results within their budgets.
//! Modes:
//! - `cargo test --test tests fuzz::` (CI): replays the saved corpus in `tests/fixtures/fuzz/` (seeds and
//!   every input that once failed), then a fixed, deterministic set of generated cases.
//! - `PAP_FUZZ_SECONDS=600 cargo test --release --test tests fuzz:: -- --test-threads 1 --nocapture`:
//!   each target generates random cases for that long; a failing input is written to
//!   `target/fuzz-failures/TARGET/` (copy it into the corpus to keep it as a regression test),
//!   and an input that runs longer than 10 s aborts the run after saving it there.

use crate::common::measure;
mod targets;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRng, TestRunner};

/// Says something on the terminal even though the test passes (the harness captures only the
/// print macros).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target)
}

/// Every saved input of `target`, by file name.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir(target))
        .expect("the corpus dir")
        .map(|e| e.expect("entry").path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("corpus file"))
        })
        .collect();
    files.sort();
    files
}

/// The input being tried, for the watchdog.
#[derive(Default)]
struct Current {
    input: Vec<u8>,
    since: Option<Instant>,
}

/// Aborts the process (after saving the input) when one input runs for more than 10 s: a
/// hang must not pass as a slow run.
fn watchdog(target: &'static str, current: Arc<Mutex<Current>>) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = current.lock().unwrap_or_else(|p| p.into_inner());
            if now
                .since
                .is_some_and(|t| t.elapsed() > Duration::from_secs(10))
            {
                let path = save_failure(target, &now.input);
                say(&format!(
                    "fuzz {target}: an input ran over 10 s; saved to {}",
                    path.display()
                ));
                std::process::abort();
            }
        }
    });
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/fuzz-failures")
        .join(target);
    std::fs::create_dir_all(&dir).expect("failure dir");
    let name = format!("input-{:016x}", fxhash(input));
    let path = dir.join(name);
    std::fs::write(&path, input).expect("save failing input");
    path
}

fn fxhash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Runs `check` on the corpus of `target`, then on generated inputs: a fixed number of
/// deterministic cases, or random ones for `PAP_FUZZ_SECONDS`.
fn fuzz<S>(target: &'static str, strategy: S, check: fn(&[u8]) -> Result<(), String>)
where
    S: Strategy<Value = Vec<u8>>,
{
    for (name, input) in corpus(target) {
        if let Err(why) = check(&input) {
            panic!("fuzz {target}: corpus file {name}: {why}");
        }
    }
    let seconds: Option<u64> = std::env::var("PAP_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let current = Arc::new(Mutex::new(Current::default()));
    if seconds.is_some() {
        watchdog(target, current.clone());
    }
    let cases = std::env::var("PAP_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let started = Instant::now();
    let mut total = 0u64;
    loop {
        let mut runner = match seconds {
            Some(_) => TestRunner::new(config.clone()),
            None => TestRunner::new_with_rng(
                config.clone(),
                TestRng::deterministic_rng(config.rng_algorithm),
            ),
        };
        let result = runner.run(&strategy, |input| {
            {
                let mut now = current.lock().unwrap_or_else(|p| p.into_inner());
                now.input.clone_from(&input);
                now.since = Some(Instant::now());
            }
            let outcome = check(&input);
            current.lock().unwrap_or_else(|p| p.into_inner()).since = None;
            outcome.map_err(TestCaseError::fail)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(why, input)) => {
                let path = save_failure(target, &input);
                panic!(
                    "fuzz {target}: {why}; the input is saved in {}",
                    path.display()
                );
            }
            Err(TestError::Abort(why)) => panic!("fuzz {target}: aborted: {why}"),
        }
        total += u64::from(cases);
        if seconds.is_none_or(|s| started.elapsed() >= Duration::from_secs(s)) {
            break;
        }
    }
    say(&format!(
        "fuzz {target}: {} corpus inputs and {total} generated cases in {:.1} s, no failure ({}); peak memory of the process {} MiB",
        corpus(target).len(),
        started.elapsed().as_secs_f64(),
        targets::stats(target),
        measure::peak_kib(std::process::id()) / 1024
    ));
}

#[test]
fn events() {
    fuzz("events", targets::event_bytes(), targets::check_events);
}

#[test]
fn jsonpath() {
    fuzz(
        "jsonpath",
        targets::path_and_document(),
        targets::check_jsonpath,
    );
}

#[test]
fn manifests() {
    fuzz(
        "manifests",
        targets::manifest_yaml(),
        targets::check_manifests,
    );
}
