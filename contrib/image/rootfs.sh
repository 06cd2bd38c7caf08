#!/bin/sh
# Lays out the container image's root file system from built binaries: pap and pap-supervise,
# the shared libraries `ldd` says they load (glibc's, from the machine that built them), the
# CA certificates (pap verifies TLS against the system's roots), and a passwd and group file
# naming the non-root user the image runs as (uid and gid 10001). No shell, no package
# manager.
#
#   contrib/image/rootfs.sh BIN_DIR ROOTFS     e.g. target/release target/image/rootfs
#
# Beside ROOTFS it makes data-layer/ and tmp-layer/ (see the end).
set -eu

bin=$1
root=$2
certs=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
# Only a release build ships (a test build lets PAP_NOW move its clock).
"$(dirname "$0")/../release/release-binary.sh" "$bin"
[ -r "$certs" ] || { echo "rootfs.sh: no CA certificates at $certs (Debian: ca-certificates)" >&2; exit 1; }

rm -rf "$root"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs"
install -m 0755 "$bin/pap" "$bin/pap-supervise" "$root/usr/local/bin/"

# Every library either binary loads, at the path the dynamic loader looks for it, and the
# loader itself (the `/lib64/ld-linux-x86-64.so.2` line has no `=>`).
for b in pap pap-supervise; do
    ldd "$bin/$b"
done | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u |
while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

cp -L "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\npap:x:10001:10001:pap:/data:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\npap:x:10001:\n' > "$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group"

# The two folders the image writes, each in a folder of its own so that the Containerfile's
# COPY keeps their modes: /data 0700 (given to the image's user there), /tmp 1777.
layers=$(dirname "$root")
rm -rf "$layers/data-layer" "$layers/tmp-layer"
mkdir -p "$layers/data-layer/data" "$layers/tmp-layer/tmp"
chmod 0700 "$layers/data-layer/data"
chmod 1777 "$layers/tmp-layer/tmp"
