//! Risk stage: effective risk = max(agent.risk_level, every tool's risk_override) (PAP 0.2
//! section 5); `high` pauses the invocation for a human's approval.

use super::{Outcome, Verdict};
use crate::manifest::compiled::{Agent, RiskLevel};

pub fn check(agent: &Agent) -> Verdict {
    if !agent.requires_approval() {
        return Verdict::Continue;
    }
    let why = if agent.risk_level == RiskLevel::High {
        "the agent's risk_level is high".to_owned()
    } else {
        format!(
            "tool {} has risk_override high",
            agent.high_risk_tools().join(", ")
        )
    };
    Verdict::Stop(
        Outcome::AwaitingApproval,
        format!("effective risk high ({why}): waits for `pap approve` or `pap reject`").into(),
    )
}
