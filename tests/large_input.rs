//! One huge event inside a pretty-printed JSON array (or among pretty-printed documents) costs
//! no more memory than the event size limit allows: the input is read value by value, the
//! huge one is skipped unread and reported with its place and size, and the small ones around
//! it are decided. (Before, the whole input was read and parsed at once: a 100 MB event cost
//! 424 MB.)
//!
//! The bound is the issue's, 2 x `max_event_bytes` + 40 MB, with pap's own footprint measured
//! rather than assumed: the debug binary the tests run is larger than a release build (about
//! 44 MB for a dispatch of a few small events, against about 20 MB), so the allowance for pap
//! itself is the peak of the same dispatch without the huge event, and the huge event may add
//! 2 x `max_event_bytes` and a margin for the allocator (16 MiB; the reading itself adds about
//! 3 MiB).
//!
//! Scale: `PAP_TEST_LARGE_EVENT_MB` (default 30 for CI; the figure is 100).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::common::dispatch::{Project, T0, ev, run_of};
use crate::common::measure::output_with_peak_kib;
use serde_json::json;

/// The fixture's default `max_event_bytes` (1 MiB).
const MAX_EVENT_BYTES: u64 = 1 << 20;

fn large_event_mb() -> usize {
    std::env::var("PAP_TEST_LARGE_EVENT_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

/// Small events `s0`..`s5` pretty-printed, with event `big` (its `data.blob` `mb` MiB of text)
/// fourth, as one array or as documents one after another; without it when `mb` is 0.
fn write_input(dir: &Path, name: &str, array: bool, mb: usize) -> PathBuf {
    let path = dir.join(name);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let pretty = |id: &str| {
        serde_json::to_string_pretty(&ev(id, "test.basic.happened", json!({"n": id}))).unwrap()
    };
    let (open, between, close) = if array {
        ("[\n", ",\n", "\n]\n")
    } else {
        ("", "\n", "\n")
    };
    out.write_all(open.as_bytes()).unwrap();
    for i in 0..6 {
        if i > 0 {
            out.write_all(between.as_bytes()).unwrap();
        }
        if i == 3 && mb == 0 {
            out.write_all(pretty("s3").as_bytes()).unwrap();
        } else if i == 3 {
            write!(
                out,
                "{{\n  \"pap_version\": \"0.2\",\n  \"id\": \"big\",\n  \"type\": \"test.basic.happened\",\n  \"source\": \"test\",\n  \"time\": \"2026-03-11T05:59:00Z\",\n  \"data\": {{\n    \"blob\": \""
            )
            .unwrap();
            let chunk = "0123456789abcdef".repeat(1 << 16);
            for _ in 0..mb {
                out.write_all(chunk.as_bytes()).unwrap();
            }
            out.write_all(b"\"\n  }\n}").unwrap();
        } else {
            out.write_all(pretty(&format!("s{i}")).as_bytes()).unwrap();
        }
    }
    out.write_all(close.as_bytes()).unwrap();
    out.flush().unwrap();
    path
}

/// The peak of `pap dispatch --json --no-run FILE` in a fresh copy of the project, in MiB.
fn dispatch_peak(file: &Path) -> (crate::common::dispatch::Run, u64) {
    let p = Project::new();
    let (out, peak_kib) =
        output_with_peak_kib(p.cmd(T0).args(["dispatch", "--json", "--no-run"]).arg(file));
    (run_of(&out), peak_kib / 1024)
}

fn check(array: bool, big_input: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mb = large_event_mb();
    let name = big_input.split(['[', ':']).next().unwrap();
    let (_, base_mib) = dispatch_peak(&write_input(dir.path(), "small.json", array, 0));
    let (run, peak_mib) = dispatch_peak(&write_input(dir.path(), name, array, mb));
    let bound_mib = base_mib + 2 * MAX_EVENT_BYTES / (1 << 20) + 16;
    println!(
        "{name}: a {mb} MiB event among 5 small ones: pap dispatch peaked at {peak_mib} MiB, \
         {base_mib} MiB without it (bound {bound_mib} MiB)"
    );
    assert!(
        peak_mib <= bound_mib,
        "pap dispatch peaked at {peak_mib} MiB reading a {mb} MiB event, {base_mib} MiB without \
         it: more than 2 x max_event_bytes + 16 MiB over that"
    );
    // An invalid event (the huge one) makes the exit 3; the others were decided.
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    for id in ["s0", "s1", "s2", "s4", "s5"] {
        assert_eq!(run.outcome(id, "t-echo"), "queued", "{id}: {}", run.stdout);
    }
    let refused = run
        .lines
        .iter()
        .find(|l| l["status"] == "invalid")
        .unwrap_or_else(|| panic!("no invalid line: {}", run.stdout));
    let input = refused["input"].as_str().unwrap();
    assert!(input.ends_with(big_input), "{refused}");
    // Its size as written: the text, and the event around it.
    let error = refused["error"].as_str().unwrap();
    let size: usize = error
        .strip_prefix("the value is ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{error}"));
    assert!(size > mb << 20 && size < (mb << 20) + 1000, "{error}");
}

#[test]
fn a_huge_event_in_a_pretty_printed_array_is_skipped_in_bounded_memory() {
    check(true, "big-array.json[3]");
}

#[test]
fn a_huge_event_among_pretty_printed_documents_is_skipped_in_bounded_memory() {
    // Documents are named by the line they begin on; each small one spans 10 lines.
    check(false, &format!("big-documents.json:{}", 1 + 3 * 10));
}
