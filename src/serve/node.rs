//! This serve as a node of a cluster sharing one database: its id, and the heartbeat that
//! `pap status` lists.

use std::path::Path;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::storage::{HEARTBEAT_MS, Node, Storage};

/// The environment variable that names a node (else the host and its state dir do).
pub(super) const NODE_ID_ENV: &str = "PAP_NODE_ID";

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// This node's id (see [`this`]).
pub(super) fn id(state_dir: &Path) -> String {
    std::env::var(NODE_ID_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty() && !v.chars().any(char::is_control))
        .unwrap_or_else(|| {
            let dir = state_dir
                .canonicalize()
                .unwrap_or_else(|_| state_dir.to_path_buf());
            let digest = Sha256::digest(dir.to_string_lossy().as_bytes());
            format!("{}-{}", host_name(), crate::text::hex(&digest[..4]))
        })
}

/// This node: `PAP_NODE_ID`, else `HOST-DIGEST` where the digest names the state dir, so an
/// id survives a restart and two serves on one host differ.
pub(super) fn this(state_dir: &Path, started_at: i64, listen: Option<String>) -> Node {
    Node {
        id: id(state_dir),
        host: host_name(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at,
        last_seen: started_at,
        listen,
    }
}

/// Says this node is alive when the last word is [`HEARTBEAT_MS`] old (a store only one
/// host uses keeps nothing).
pub(super) fn beat(store: &dyn Storage, node: &Node, last: &mut Option<Instant>) {
    let due = last.is_none_or(|at| at.elapsed().as_millis() as i64 >= HEARTBEAT_MS);
    if !due {
        return;
    }
    *last = Some(Instant::now());
    if let Err(e) = store.heartbeat(node) {
        super::outage::report_store(&e, "cannot record this node's heartbeat");
    }
}
