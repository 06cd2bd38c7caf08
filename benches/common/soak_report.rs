//! The soak test's samples: CSV, an SVG plot of each over time, and the steady-state
//! verdict (see `benches/soak.rs`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// One interval's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Seconds since the load started.
    pub t: f64,
    pub rss_mb: f64,
    pub file_mb: f64,
    pub live_mb: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// HTTP posts answered in the interval (the latency's sample size).
    pub posts: usize,
    pub runs_per_s: f64,
    /// The disk's own longest sync in the interval (see `disk_probe`).
    pub disk_max_ms: f64,
}

pub fn write_csv(path: &Path, samples: &[Sample]) {
    let mut out =
        String::from("seconds,rss_mb,file_mb,live_mb,p50_ms,p99_ms,posts,runs_per_s,disk_max_ms\n");
    for s in samples {
        let _ = writeln!(
            out,
            "{:.1},{:.2},{:.3},{:.3},{:.2},{:.2},{},{:.2},{:.2}",
            s.t,
            s.rss_mb,
            s.file_mb,
            s.live_mb,
            s.p50_ms,
            s.p99_ms,
            s.posts,
            s.runs_per_s,
            s.disk_max_ms
        );
    }
    std::fs::write(path, out).expect("writing the CSV");
}

/// One panel of the plot: its title and lines (name, colour, value of a sample).
type Line = (&'static str, &'static str, fn(&Sample) -> f64);

pub fn write_svg(path: &Path, samples: &[Sample]) {
    const W: f64 = 860.0;
    const PANEL: f64 = 170.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    let panels: [(&str, Vec<Line>); 4] = [
        (
            "serve RSS (MB)",
            vec![("rss", "#1f77b4", |s: &Sample| s.rss_mb)],
        ),
        (
            "state file and live data (MB)",
            vec![
                ("file", "#d62728", |s: &Sample| s.file_mb),
                ("live", "#2ca02c", |s: &Sample| s.live_mb),
            ],
        ),
        (
            "decision latency of HTTP posts (ms)",
            vec![
                ("p50", "#9467bd", |s: &Sample| s.p50_ms),
                ("p99", "#ff7f0e", |s: &Sample| s.p99_ms),
                ("disk sync max", "#7f7f7f", |s: &Sample| s.disk_max_ms),
            ],
        ),
        (
            "runs a second",
            vec![("runs/s", "#8c564b", |s: &Sample| s.runs_per_s)],
        ),
    ];
    let height = PANEL * panels.len() as f64 + 30.0;
    let t_max = samples.last().map_or(1.0, |s| s.t.max(1.0));
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    svg.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, (title, lines)) in panels.iter().enumerate() {
        let top = 20.0 + i as f64 * PANEL;
        let (plot_top, plot_h) = (top + 20.0, PANEL - 50.0);
        let y_max = samples
            .iter()
            .flat_map(|s| lines.iter().map(move |(_, _, f)| f(s)))
            .fold(0.0_f64, f64::max)
            .max(1e-9)
            * 1.1;
        let x = |t: f64| LEFT + (W - LEFT - RIGHT) * t / t_max;
        let y = |v: f64| plot_top + plot_h * (1.0 - v / y_max);
        let _ = write!(
            svg,
            r#"<text x="{LEFT}" y="{}" font-weight="bold">{title}</text>"#,
            top + 12.0
        );
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" y1="{}" x2="{LEFT}" y2="{}" stroke="black"/><line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
            plot_top,
            plot_top + plot_h,
            plot_top + plot_h,
            W - RIGHT,
            plot_top + plot_h
        );
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{:.1}</text><text x="{}" y="{}" text-anchor="end">0</text>"#,
            LEFT - 4.0,
            plot_top + 4.0,
            y_max,
            LEFT - 4.0,
            plot_top + plot_h
        );
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{:.0} min</text>"#,
            W - RIGHT,
            plot_top + plot_h + 14.0,
            t_max / 60.0
        );
        for (n, (name, colour, f)) in lines.iter().enumerate() {
            let points: Vec<String> = samples
                .iter()
                .map(|s| format!("{:.1},{:.1}", x(s.t), y(f(s))))
                .collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
                points.join(" ")
            );
            let _ = write!(
                svg,
                r#"<text x="{}" y="{}" fill="{colour}">{name}</text>"#,
                W - RIGHT - 60.0 * (n as f64 + 1.0),
                top + 12.0
            );
        }
    }
    svg.push_str("</svg>\n");
    std::fs::write(path, svg).expect("writing the plot");
}

/// The steady-state bounds, each with its figure and margin.
pub struct Verdict {
    pub ok: bool,
    pub lines: Vec<String>,
}

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

pub fn judge(samples: &[Sample], interval: Duration) -> Verdict {
    let mut v = Verdict {
        ok: true,
        lines: Vec::new(),
    };
    let steady = &samples[samples.len() / 3..];
    if steady.len() < 3 {
        v.ok = false;
        v.lines.push(format!(
            "too few samples ({}) to judge: run longer or sample more often than every {} s",
            samples.len(),
            interval.as_secs()
        ));
        return v;
    }
    let mut check = |ok: bool, line: String| {
        v.ok &= ok;
        v.lines
            .push(format!("{} {line}", if ok { "ok  " } else { "FAIL" }));
    };
    let minutes = |s: &Sample| s.t / 60.0;
    let rss = slope(
        &steady
            .iter()
            .map(|s| (minutes(s), s.rss_mb))
            .collect::<Vec<_>>(),
    );
    check(
        rss < 1.0,
        format!(
            "RSS slope {rss:+.3} MB/min over the last two thirds (bound 1 MB/min, margin {:.3})",
            1.0 - rss
        ),
    );
    let mean_file = steady.iter().map(|s| s.file_mb).sum::<f64>() / steady.len() as f64;
    let file = 100.0
        * slope(
            &steady
                .iter()
                .map(|s| (minutes(s), s.file_mb))
                .collect::<Vec<_>>(),
        )
        / mean_file.max(1e-9);
    check(
        file < 1.0,
        format!(
            "file size slope {file:+.3} %/min (bound 1 %/min, margin {:.3})",
            1.0 - file
        ),
    );
    let worst = steady
        .iter()
        .map(|s| s.file_mb / s.live_mb.max(1e-9))
        .fold(0.0_f64, f64::max);
    check(
        worst <= 1.5,
        format!(
            "file / live data at most {worst:.2}× (bound 1.5×, margin {:.2})",
            1.5 - worst
        ),
    );
    let unmeasured = steady.iter().filter(|s| s.posts == 0).count();
    check(
        unmeasured == 0,
        format!("every interval measured its latency ({unmeasured} without an answered post)"),
    );
    // Intervals in which the disk by itself stalled: their posts waited for the disk.
    let (stalled, held): (Vec<&Sample>, Vec<&Sample>) = steady
        .iter()
        .partition(|s| s.disk_max_ms > crate::disk_probe::STALL_MS);
    if !stalled.is_empty() {
        v.lines.push(format!(
            "     set aside from the latency bound, the disk alone stalled a sync > {} ms: {}",
            crate::disk_probe::STALL_MS,
            stalled
                .iter()
                .map(|s| format!(
                    "{:.0} s (disk {:.0} ms, p99 {:.1} ms)",
                    s.t, s.disk_max_ms, s.p99_ms
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut check = |ok: bool, line: String| {
        v.ok &= ok;
        v.lines
            .push(format!("{} {line}", if ok { "ok  " } else { "FAIL" }));
    };
    check(
        stalled.len() * 3 < steady.len(),
        format!(
            "the disk stalled in {} of {} steady intervals (inconclusive from a third)",
            stalled.len(),
            steady.len()
        ),
    );
    let Some(first) = held.first() else {
        return v;
    };
    let base = first.p99_ms;
    let (at, peak) = held
        .iter()
        .map(|s| (s.t, s.p99_ms))
        .fold((0.0, 0.0_f64), |a, b| if b.1 > a.1 { b } else { a });
    let ratio = peak / base.max(1e-9);
    check(
        ratio <= 3.0,
        format!(
            "p99 decision latency at most {peak:.2} ms (at {at:.0} s), {ratio:.2}× the first steady interval's {base:.2} ms (at {:.0} s; bound 3×, margin {:.2})",
            first.t,
            3.0 - ratio
        ),
    );
    v
}
