#!/usr/bin/env bash
# Builds the Debian package of wirebench: the binary, its manual pages and shell completions,
# hardened systemd units for the server and the exporter with their flags in /etc/default, and
# the pScheduler tool plugin where Debian's pScheduler looks for tools (with its settings in
# /etc/pscheduler/tool/wirebench.conf; pScheduler finds it at its next warm boot).
#
#   packaging/deb/build.sh            # cargo build --release, then target/debian/wirebench_VERSION_ARCH.deb
#   WIREBENCH_BINARY=PATH packaging/deb/build.sh   # package a binary built already (CI uses its test build)
#
# Needs only dpkg-deb (Debian's dpkg) beside cargo: no cargo-deb, nothing from the network.
# Prints the path of the package on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

arch="$(dpkg --print-architecture)"
binary="${WIREBENCH_BINARY:-}"
if [ -z "$binary" ]; then
  cargo build --release --locked -p wirebench >&2
  binary="target/release/wirebench"
fi
[ -x "$binary" ] || { echo "build.sh: no executable at $binary" >&2; exit 1; }
# The version the binary says (`wirebench 0.1.0`), so the package cannot disagree with it.
version="$("$binary" --version | awk '{ print $2 }')"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/wirebench_${version}_${arch}"
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/share/man/man1" \
  "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
  "$pkg/usr/share/fish/vendor_completions.d" "$pkg/lib/systemd/system" "$pkg/etc/default" \
  "$pkg/usr/share/doc/wirebench"

install -m 0755 "$binary" "$pkg/usr/bin/wirebench"
# The binary writes its own pages and completions, so they always match its flags.
"$pkg/usr/bin/wirebench" man --dir "$pkg/usr/share/man/man1" >/dev/null
gzip -9n "$pkg"/usr/share/man/man1/*.1
"$pkg/usr/bin/wirebench" completions bash >"$pkg/usr/share/bash-completion/completions/wirebench"
"$pkg/usr/bin/wirebench" completions zsh >"$pkg/usr/share/zsh/vendor-completions/_wirebench"
"$pkg/usr/bin/wirebench" completions fish >"$pkg/usr/share/fish/vendor_completions.d/wirebench.fish"
install -m 0644 packaging/systemd/wirebench-server.service packaging/systemd/wirebench-exporter.service \
  "$pkg/lib/systemd/system/"
# The pScheduler plugin, as `make install` puts it (packaging/pscheduler/wirebench/Makefile).
make -s -C packaging/pscheduler/wirebench install \
  DESTDIR="$pkg/usr/lib/pscheduler/classes/tool/wirebench" CONFDIR="$pkg/etc/pscheduler/tool" >&2
install -m 0644 packaging/deb/wirebench-server.default "$pkg/etc/default/wirebench-server"
install -m 0644 packaging/deb/wirebench-exporter.default "$pkg/etc/default/wirebench-exporter"
install -m 0644 README.md docs/security.md docs/guide/fleet.md "$pkg/usr/share/doc/wirebench/"
cat >"$pkg/usr/share/doc/wirebench/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: wirebench
Files: *
Copyright: the wirebench developers
License: $(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
COPYRIGHT

# The libraries the binary links, as Debian packages (dpkg -S), for Depends.
depends="$(ldd "$binary" | awk '/=> \// { print $3 }' | while read -r lib; do
  dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sort -u | paste -sd, - | sed 's/,/, /g')"
installed_kib="$(du -sk "$pkg" | cut -f1)"

cat >"$pkg/DEBIAN/control" <<CONTROL
Package: wirebench
Version: $version
Architecture: $arch
Maintainer: wirebench developers <wirebench@localhost>
Installed-Size: $installed_kib
Depends: ${depends:-libc6}
Section: net
Priority: optional
Homepage: https://github.com/wirebench/wirebench
Description: network throughput and round-trip measurement (TCP, UDP, QUIC)
 wirebench measures how fast data moves over a network: TCP, UDP and QUIC,
 streaming and stop-and-wait, round trips under load, DNS, responsiveness,
 with exact counts and a loss split by cause. It serves iperf3 clients and
 runs as a hardened system service (wirebench-server, wirebench-exporter).
CONTROL
printf '/etc/default/wirebench-server\n/etc/default/wirebench-exporter\n/etc/pscheduler/tool/wirebench.conf\n' \
  >"$pkg/DEBIAN/conffiles"
# The units are installed, not started: a measurement server opens a port to the network, so
# the administrator enables it (systemctl enable --now wirebench-server).
cat >"$pkg/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
# A pScheduler host picks the tool plugin up at its next warm boot; ask for one now.
if command -v pscheduler >/dev/null 2>&1; then
  pscheduler internal warmboot >/dev/null 2>&1 || true
fi
POSTINST
cat >"$pkg/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
POSTRM
cat >"$pkg/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop wirebench-server.service wirebench-exporter.service >/dev/null 2>&1 || true
fi
PRERM
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/postrm" "$pkg/DEBIAN/prerm"

mkdir -p target/debian
out="target/debian/wirebench_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$pkg" "$out" >&2
echo "$out"
