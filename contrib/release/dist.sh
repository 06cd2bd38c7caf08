#!/bin/sh
# Makes pap's release archive from an already built release binary, and the files the
# Debian package and the container image take from it.
#
#   cargo build --release --locked --bin pap --bin pap-supervise
#   contrib/release/dist.sh [TARGET_DIR]        # TARGET_DIR: target (default)
#
# Writes, under TARGET_DIR/dist/:
#   pap-VERSION-ARCH-linux-gnu.tar.gz         the archive: bin/pap, bin/pap-supervise,
#                                             man/pap.1, completions/ (bash, zsh, fish),
#                                             systemd/pap.service (for /usr/local/bin),
#                                             LICENSE-MIT, LICENSE-APACHE, README.md
#   pap-VERSION-ARCH-linux-gnu.tar.gz.sha256  its SHA-256, as `sha256sum -c` reads it
#   bin/                                      the binaries the .deb installs, as checked
#   share/                                    the man page (gzipped) and completions the
#                                             .deb installs (Cargo.toml, package.metadata.deb)
#
# The man page and completions are made by the binary being shipped (`pap man`,
# `pap completions SHELL`), so they describe exactly that build. The archive is reproducible
# from the same binaries: fixed owners, modes and times (SOURCE_DATE_EPOCH, else the last
# commit's time), files in a fixed order.
set -eu

cd "$(dirname "$0")/../.."
target=${1:-target}
bin="$target/release"
# Only a release build ships (a test build lets PAP_NOW move its clock).
contrib/release/release-binary.sh "$bin"

version=$("$bin/pap" --version | awk '{print $2}')
arch=$(uname -m)
name="pap-$version-$arch-linux-gnu"
dist="$target/dist"
stage="$dist/$name"
rm -rf "$stage" "$dist/share" "$dist/bin"
mkdir -p "$stage/bin" "$stage/man" "$stage/completions" "$stage/systemd" \
    "$dist/share/man" "$dist/share/completions" "$dist/bin"
# The .deb takes its binaries from here (`cargo deb --no-build`): the ones checked above,
# whatever a later `cargo test --release` writes into target/release.
install -m 0755 "$bin/pap" "$bin/pap-supervise" "$dist/bin/"

install -m 0755 "$bin/pap" "$bin/pap-supervise" "$stage/bin/"
"$bin/pap" man > "$stage/man/pap.1"
"$bin/pap" completions bash > "$stage/completions/pap.bash"
"$bin/pap" completions zsh > "$stage/completions/_pap"
"$bin/pap" completions fish > "$stage/completions/pap.fish"
# The packaged unit runs /usr/bin/pap; an archive is installed under /usr/local.
sed 's|/usr/bin/pap|/usr/local/bin/pap|g' contrib/pap.service > "$stage/systemd/pap.service"
install -m 0644 LICENSE-MIT LICENSE-APACHE README.md "$stage/"
chmod 0644 "$stage/man/pap.1" "$stage/completions/"* "$stage/systemd/pap.service"

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
(
    cd "$dist"
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
        -cf - "$name" | gzip -n -9 > "$name.tar.gz"
    sha256sum "$name.tar.gz" > "$name.tar.gz.sha256"
)

gzip -n -9 -c "$stage/man/pap.1" > "$dist/share/man/pap.1.gz"
cp "$stage/completions/pap.bash" "$stage/completions/_pap" "$stage/completions/pap.fish" \
    "$dist/share/completions/"

echo "$dist/$name.tar.gz"
