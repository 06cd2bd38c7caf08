//! Measurements the benchmarks and the fuzz runs report beside their figures (Linux).

use std::path::Path;
use std::time::Instant;

/// Peak resident memory of a process (`VmHWM`) in KiB, 0 where /proc cannot tell.
pub fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// What one `fdatasync` of a 4 KiB append costs in `dir` right now, in ms: (median, p90) of
/// 50. A figure that touches the disk means little without it.
pub fn fsync_ms(dir: &Path) -> (f64, f64) {
    use std::io::Write;
    let path = dir.join(".fsync-probe");
    let mut file = std::fs::File::create(&path).expect("fsync probe");
    let mut times: Vec<f64> = (0..50)
        .map(|_| {
            file.write_all(&[b'x'; 4096]).expect("write");
            let started = Instant::now();
            file.sync_data().expect("fdatasync");
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    drop(file);
    let _ = std::fs::remove_file(&path);
    times.sort_by(f64::total_cmp);
    (times[25], times[45])
}
