#!/bin/sh
# Refuses a pap binary that is not a release build: every packaging path (the archive, the
# Debian package, the container image) runs it on the binaries it ships.
#
#   contrib/release/release-binary.sh BIN_DIR        e.g. target/release
#
# A test build (cargo's `test-clock` feature: `cargo test --release` builds the binaries with
# it, into the same target/release) lets PAP_NOW move its clock. Installed on a server, anyone
# who sets that variable for it would move its idempotency windows, throttles, approval
# deadlines and retentions; it must never ship. Such a binary says so in `pap --version`.
set -eu

bin=$1
for b in pap pap-supervise; do
    if [ ! -x "$bin/$b" ]; then
        echo "release-binary.sh: $bin/$b is missing: run cargo build --release --locked --bin pap --bin pap-supervise first" >&2
        exit 1
    fi
done
version=$("$bin/pap" --version)
case "$version" in
    *"test build"*)
        echo "release-binary.sh: $bin/pap is a test build ($version): it must not be shipped." >&2
        echo "  cargo test builds the binaries with the test-clock feature; build them again with" >&2
        echo "  cargo build --release --locked --bin pap --bin pap-supervise" >&2
        exit 1
        ;;
esac
