//! The systemd unit in contrib/ is one systemd accepts: `systemd-analyze verify` where it is
//! installed (CI installs it), with its ExecStart pointed at the binary under test. Its
//! sandbox scores 3.0 or less in `systemd-analyze security` ("OK"), and keeps what pap's
//! agents need: the network, and the state directory (store and spool) for writing.

use crate::common;

use std::process::Command;

/// The most `systemd-analyze security` may score the unit (0 is sealed, 10 wide open; 3.0 or
/// less reads "OK").
const MAX_EXPOSURE: f64 = 3.0;

fn unit() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/pap.service")).unwrap()
}

/// The value of every `key=` line of the unit, in order.
fn settings<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

fn systemd_analyze() -> bool {
    let available = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        assert!(
            std::env::var_os("PAP_TEST_REQUIRE_SYSTEMD").is_none(),
            "PAP_TEST_REQUIRE_SYSTEMD is set but systemd-analyze is missing"
        );
    }
    available
}

#[test]
fn the_sandbox_is_tight_and_leaves_agents_the_network_and_the_state() {
    let unit = unit();
    // What agents need, kept: the state dir writable, Internet sockets, W+X memory for
    // node's and Python's JITs (MCP servers through npx and uvx).
    assert_eq!(settings(&unit, "ReadWritePaths"), ["/var/lib/pap"]);
    assert_eq!(settings(&unit, "StateDirectory"), ["pap"]);
    let families = settings(&unit, "RestrictAddressFamilies").join(" ");
    for family in ["AF_UNIX", "AF_INET", "AF_INET6"] {
        assert!(families.split(' ').any(|f| f == family), "{families}");
    }
    for closed in ["PrivateNetwork", "IPAddressDeny", "MemoryDenyWriteExecute"] {
        assert!(
            settings(&unit, closed).is_empty(),
            "{closed} would break agents"
        );
    }
    if !systemd_analyze() {
        common::skip_note("systemd-analyze is not installed: the unit's exposure is not scored");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pap.service");
    std::fs::write(&file, &unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(&file)
        .output()
        .unwrap();
    let said = common::stdout(&out);
    let exposure: f64 = said
        .lines()
        .find_map(|l| l.split("Overall exposure level for pap.service:").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure in: {said}{}", common::stderr(&out)));
    println!("systemd-analyze security: exposure {exposure}");
    assert!(exposure <= MAX_EXPOSURE, "exposure {exposure}:\n{said}");
}

#[test]
fn systemd_accepts_the_unit() {
    let unit = unit();
    assert!(unit.contains("ExecStart=/usr/bin/pap serve"), "{unit}");
    assert!(
        unit.contains("KillMode=mixed"),
        "serve stops its agents itself"
    );
    if !systemd_analyze() {
        common::skip_note("systemd-analyze is not installed: the unit file is not verified");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pap.service");
    std::fs::write(
        &file,
        unit.replace("/usr/bin/pap", env!("CARGO_BIN_EXE_pap")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // A line systemd ignores is only a warning to it; here it is a defect.
    assert!(said.trim().is_empty(), "systemd-analyze said: {said}");
}
