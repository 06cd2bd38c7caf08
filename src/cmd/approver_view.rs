//! What a person deciding an approval needs on one screen (`pap invocations show ID` of an
//! invocation awaiting approval): why it waits (the agent's effective risk and the tools that
//! make it high), the event's data (pretty, clipped to the terminal), the deadline, and the
//! exact commands to approve or reject it. (The deadline is in the rows above it.)

use std::fmt::Write as _;

use crate::domain::Invocation;
use crate::manifest::Project;
use crate::manifest::compiled::RiskLevel;
use crate::term::Paint;

/// At most this many lines of the event's data are shown.
const DATA_LINES: usize = 30;

/// Appends the approver's section for `inv` (awaiting approval) to `o`. `short` is the id to
/// type; `project`, when it loads, says which tools make the agent high-risk.
pub(super) fn append(
    o: &mut String,
    inv: &Invocation,
    short: &str,
    project: Option<&Project>,
    width: usize,
    p: Paint,
) {
    let _ = writeln!(o, "  {}", p.yellow("waits for a person's approval"));
    let why = project
        .and_then(|project| project.agent(&inv.agent))
        .map(|agent| {
            let tools = agent.high_risk_tools();
            match (agent.risk_level == RiskLevel::High, tools.is_empty()) {
                (true, true) => "the agent's risk_level is high".to_owned(),
                (true, false) => format!(
                    "the agent's risk_level is high; high-risk tools: {}",
                    tools.join(", ")
                ),
                (false, _) => format!("tools with risk_override high: {}", tools.join(", ")),
            }
        })
        .unwrap_or_else(|| "the agent's effective risk was high when it was decided".into());
    let _ = writeln!(o, "  {:<10}{} ({why})", "risk", p.red(&inv.risk));
    let _ = writeln!(o, "  event data");
    let data = inv.event.get("data").unwrap_or(&inv.event);
    let pretty = serde_json::to_string_pretty(data).unwrap_or_default();
    let lines: Vec<&str> = pretty.lines().collect();
    for line in lines.iter().take(DATA_LINES) {
        let _ = writeln!(o, "    {}", clip(line, width.saturating_sub(4)));
    }
    if lines.len() > DATA_LINES {
        let _ = writeln!(
            o,
            "    {}",
            p.dim(&format!(
                "… {} more lines: `pap invocations show {short} --json` has the whole event",
                lines.len() - DATA_LINES
            ))
        );
    }
    let _ = writeln!(
        o,
        "  {:<10}pap approve {short} --by \"$USER\" --note \"…\"",
        "approve"
    );
    let _ = writeln!(o, "  {:<10}pap reject {short} --reason \"…\"", "reject");
}

/// `line` cut to `width` characters, with `…` where it was cut.
fn clip(line: &str, width: usize) -> String {
    let width = width.max(8);
    if line.chars().count() <= width {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// The terminal's width: `COLUMNS`, else 100.
pub(super) fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&c: &usize| c >= 20)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Status;

    #[test]
    fn long_lines_and_long_data_are_clipped_with_a_pointer_to_the_rest() {
        assert_eq!(clip("abcdefghijkl", 10), "abcdefghi…");
        assert_eq!(clip("short", 10), "short");
        let mut inv = Invocation::for_tests("inv_1", Status::AwaitingApproval);
        let data: serde_json::Map<String, serde_json::Value> = (0..50)
            .map(|i| (format!("k{i:02}"), serde_json::json!("x".repeat(200))))
            .collect();
        inv.event = serde_json::json!({"data": data});
        inv.approval_deadline = Some(0);
        let mut o = String::new();
        append(&mut o, &inv, "abc123", None, 60, Paint { on: false });
        assert!(o.contains("pap approve abc123 --by"), "{o}");
        assert!(o.contains("pap reject abc123 --reason"), "{o}");
        assert!(
            o.contains("more lines: `pap invocations show abc123 --json`"),
            "{o}"
        );
        assert!(o.lines().all(|l| l.chars().count() <= 80), "{o}");
    }
}
