//! The systemd unit in contrib/ is one systemd accepts: `systemd-analyze verify` where it is
//! installed (CI installs it), with its ExecStart pointed at the binary under test.

use crate::common;

use std::process::Command;

#[test]
fn systemd_accepts_the_unit() {
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/pap.service"))
        .unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/pap serve"),
        "{unit}"
    );
    assert!(
        unit.contains("KillMode=mixed"),
        "serve stops its agents itself"
    );
    let available = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        assert!(
            std::env::var_os("PAP_TEST_REQUIRE_SYSTEMD").is_none(),
            "PAP_TEST_REQUIRE_SYSTEMD is set but systemd-analyze is missing"
        );
        common::skip_note("systemd-analyze is not installed: the unit file is not verified");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pap.service");
    std::fs::write(
        &file,
        unit.replace("/usr/local/bin/pap", env!("CARGO_BIN_EXE_pap")),
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
