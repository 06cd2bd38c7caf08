//! The disk's own sync latency, measured beside a benchmark: a 4 KiB append and an
//! fdatasync every 20 ms on a file of its own, on its own thread.
//!
//! Some disks stall a sync now and then with nothing else running (this project's 2-core
//! VM: up to half a second, a few times a minute), and every decision committed meanwhile
//! waits for it. The probe tells those stalls apart from what pap adds.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What counts as a stall of the disk.
pub(crate) const STALL_MS: f64 = 50.0;

pub(crate) struct DiskProbe {
    stop: Arc<AtomicBool>,
    /// (when the sync ended, how long it took in ms).
    syncs: Arc<Mutex<Vec<(Instant, f64)>>>,
    /// When each sync longer than [`STALL_MS`] began and ended, by the wall clock.
    stalls: Arc<Mutex<Vec<(SystemTime, SystemTime)>>>,
    thread: std::thread::JoinHandle<()>,
}

impl DiskProbe {
    pub(crate) fn start(dir: &Path) -> DiskProbe {
        let path = dir.join(".disk-probe");
        let stop = Arc::new(AtomicBool::new(false));
        let syncs = Arc::new(Mutex::new(Vec::new()));
        let stalls = Arc::new(Mutex::new(Vec::new()));
        let (stopping, recorded, stalled) = (stop.clone(), syncs.clone(), stalls.clone());
        let thread = std::thread::spawn(move || {
            let mut file = std::fs::File::create(&path).expect("disk probe");
            let mut written = 0u64;
            while !stopping.load(Ordering::Relaxed) {
                if written >= 64 << 20 {
                    // Bounded: start the file over rather than grow it for an hour.
                    file.set_len(0).expect("disk probe");
                    file = std::fs::File::create(&path).expect("disk probe");
                    written = 0;
                }
                file.write_all(&[b'x'; 4096]).expect("write");
                written += 4096;
                let (started, wall) = (Instant::now(), SystemTime::now());
                file.sync_data().expect("fdatasync");
                let ms = started.elapsed().as_secs_f64() * 1e3;
                if ms > STALL_MS {
                    stalled.lock().unwrap().push((wall, SystemTime::now()));
                }
                recorded.lock().unwrap().push((Instant::now(), ms));
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(file);
            let _ = std::fs::remove_file(&path);
        });
        DiskProbe {
            stop,
            syncs,
            stalls,
            thread,
        }
    }

    /// Whether the disk stalled a sync at some time between `from` and `to`.
    pub(crate) fn stalled_between(&self, from: SystemTime, to: SystemTime) -> bool {
        self.stalls
            .lock()
            .unwrap()
            .iter()
            .any(|&(began, ended)| began < to && ended > from)
    }

    /// The syncs (ms) that ended after `from` and up to `to`.
    pub(crate) fn between(&self, from: Instant, to: Instant) -> Vec<f64> {
        self.syncs
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at > from && *at <= to)
            .map(|(_, ms)| *ms)
            .collect()
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// `p50 …, p99 …, max …, N over 50 ms` of some syncs.
pub(crate) fn summary(mut ms: Vec<f64>) -> String {
    if ms.is_empty() {
        return "no syncs".into();
    }
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| percentile(&ms, p);
    format!(
        "{} syncs: p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms, {} over {STALL_MS} ms",
        ms.len(),
        pct(0.5),
        pct(0.99),
        ms.last().copied().unwrap_or_default(),
        ms.iter().filter(|&&m| m > STALL_MS).count()
    )
}

/// The `p` quantile (0..=1) of `sorted`, nearest rank; `sorted` must not be empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
