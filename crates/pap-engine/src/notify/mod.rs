//! Outcomes as ANP notifications: the ledger with its state machine and leases, routing to
//! the inbox, an agent's queue or a handling agent's turn, the watchdog, deduplication,
//! ATP approval requests and sinks. The store keeps the records (`domain::Notification`,
//! `domain::InboxMessage`); this module decides what happens to them.
//!
//! Where each part lives:
//! - `outcome`: what produces a notification (invocation outcomes, external tool calls);
//! - `produce`: deduplication (ANP 7.1) and routing (ANP 4), escalation (6.2);
//! - `due`: escalations due but not recorded yet, as every reader shows them (6.2);
//! - `ledger`: the state machine (5.1) and lease fencing (6.3);
//! - `queue`: an agent's queue, delivered at its next invocation (JP RFD 011);
//! - `tool_filter`: a tool's `notifications:` switches, applied at that delivery;
//! - `agent_loop`: which agents' tool loops run, so a critical notification rides on one
//!   rather than forcing a second turn (JP RFD 011);
//! - `reply`: a handling agent's acknowledgement, narration or silence;
//! - `inbox`: human acknowledgement and the JSON views;
//! - `pump`: the watchdog and sink deliveries, on a timer;
//! - `sinks`: webhook, command and NDJSON delivery;
//! - `atp`: approval requests and responses as ATP messages;
//! - `template`: `{placeholder}` templates from manifests.

pub(crate) mod agent_loop;
pub mod atp;
pub mod due;
pub mod inbox;
pub(crate) mod ledger;
/// Why a notification's transition was refused (ANP 5.1), in its own words.
pub use ledger::Refused;
pub(crate) mod outcome;
pub(crate) mod produce;
pub mod pump;
pub(crate) mod queue;
pub(crate) mod reply;
pub(crate) mod sinks;
pub(crate) mod tool_filter;
