//! Benchmark: the worst cost one hostile event can cause a trigger filter. Each workload is a
//! path with descendant segments over an event of about 1 MiB shaped to make it explode,
//! evaluated by pap's budgeted evaluator (default budget, 100,000 nodes), against a baseline
//! in the same run: parsing that event with serde_json (what every event costs anyway). The
//! unbounded evaluator of jsonpath-rust is timed on a small version of the same shape, since
//! on the full one it runs for minutes.
//!
//! "select KiB" is the heap one evaluation takes at its peak, counted by the allocator.
//!
//! Run: `cargo bench --bench jsonpath` (`PAP_BENCH_ROUNDS=N` sets the rounds, default 21).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pap::jsonpath::JsonPath;
use serde_json::{Map, Value, json};

/// Counts live heap bytes and their peak, so the memory one evaluation takes is measured
/// itself rather than read off the whole process.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes `f` took at its peak, beyond what was live before it.
fn peak_of(f: impl FnOnce()) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    f();
    PEAK.load(Ordering::Relaxed) - before
}

fn main() {
    let rounds: usize = std::env::var("PAP_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(21);
    let wide_doc = wide(60, 60, 30);
    let deep = deep();
    let flat = json!({"data": {"items": (0..120_000).collect::<Vec<u32>>()}});
    let workloads = [
        ("$..*..*..*", &wide_doc, "60 x 60 objects of 30 numbers"),
        (
            "$..a..w",
            &deep,
            "128 levels of {a: …, w: …} with a 1 MiB tail",
        ),
        ("$..*", &flat, "one array of 120,000 numbers"),
        ("$..*[?@ > 3]", &wide_doc, "60 x 60 objects of 30 numbers"),
    ];
    println!("worst-case JSONPath evaluation over one hostile event (median of {rounds} rounds)");
    println!(
        "{:<14} {:>9} {:>10} {:>11} {:>7} {:>10}  event",
        "path", "bytes", "parse ms", "select ms", "ratio", "select KiB"
    );
    for (path, doc, shape) in workloads {
        let text = doc.to_string();
        let parse = median(rounds, || {
            let v: Value = serde_json::from_str(&text).expect("parses");
            std::hint::black_box(v);
        });
        let p = JsonPath::parse(path).expect("valid path");
        let select = median(rounds, || {
            let r = p.select(doc);
            std::hint::black_box(r.is_ok());
        });
        let mut over = false;
        let heap = peak_of(|| over = p.select(doc).is_err());
        println!(
            "{path:<14} {:>9} {:>10.2} {:>11.2} {:>6.2}x {:>10}  {shape}{}",
            text.len(),
            ms(parse),
            ms(select),
            select.as_secs_f64() / parse.as_secs_f64(),
            heap / 1024,
            if over { " (stopped at the budget)" } else { "" }
        );
    }
    let small = wide(8, 8, 8);
    let q = jsonpath_rust::parser::parse_json_path("$..*..*..*").expect("valid");
    let theirs = median(3, || {
        let r = jsonpath_rust::query::js_path_process(&q, &small).map(|v| v.len());
        std::hint::black_box(r.ok());
    });
    let ours = median(3, || {
        let r = JsonPath::parse("$..*..*..*")
            .unwrap()
            .select(&small)
            .map(|v| v.len());
        std::hint::black_box(r.ok());
    });
    println!(
        "jsonpath-rust, unbounded, $..*..*..* on 8 x 8 objects of 8 numbers ({} bytes): {:.2} ms; pap: {:.2} ms",
        small.to_string().len(),
        ms(theirs),
        ms(ours)
    );
    println!(
        "peak resident memory of this process (the events included): {} MiB",
        measure::peak_kib(std::process::id()) / 1024
    );
}

/// `outer` objects of `middle` objects of `leaves` numbers.
fn wide(outer: usize, middle: usize, leaves: usize) -> Value {
    let leaf: Map<String, Value> = (0..leaves).map(|i| (format!("n{i}"), json!(i))).collect();
    let mid: Map<String, Value> = (0..middle)
        .map(|i| (format!("m{i}"), Value::Object(leaf.clone())))
        .collect();
    let top: Map<String, Value> = (0..outer)
        .map(|i| (format!("t{i}"), Value::Object(mid.clone())))
        .collect();
    json!({"data": top})
}

/// Nested as deep as serde_json parses (128), each level with `a` and `w`, and a large
/// array at the bottom so the event is about 1 MiB.
fn deep() -> Value {
    let mut v = json!({"w": (0..150_000).collect::<Vec<u32>>()});
    for _ in 0..120 {
        v = json!({"a": v, "w": 1});
    }
    v
}

fn median(rounds: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
