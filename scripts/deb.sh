#!/usr/bin/env bash
# The Debian package `murmur`: the static `mur` and `mur-roost` that scripts/release.sh wrote
# to DIST, the drivers' and hooks' archives filed where `mur` reads them without a publish step
# (the system registry, /usr/share/murmur/artifacts), the examples (/usr/share/murmur/examples), a systemd unit for
# mur-roost with /etc/default/mur-roost, and a manual page for each binary rendered from its
# help text. Writes OUT/murmur_VERSION_ARCH.deb (default OUT: DIST) and adds it to
# DIST/SHA256SUMS. Needs dpkg-deb and gzip; nothing of the host is read but this tree.
# Usage: scripts/deb.sh DIST [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
dist="${1:?usage: scripts/deb.sh DIST [OUT]}"
out="${2:-$dist}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) echo "deb: no Debian architecture for $(uname -m)" >&2; exit 1 ;;
esac
triple="$(uname -m)-unknown-linux-musl"
mur="$dist/mur-$version-$triple"
roost="$dist/mur-roost-$version-$triple"
for f in "$mur" "$roost"; do
  [ -x "$f" ] || { echo "deb: $f is missing: run scripts/release.sh $dist first" >&2; exit 1; }
done
command -v dpkg-deb >/dev/null 2>&1 || { echo "deb: dpkg-deb is needed (apt-get install dpkg)" >&2; exit 1; }

stage="$(mktemp -d /tmp/murmur-deb.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
umask 022

step() { echo "deb: $*" >&2; }

step "1. the binaries"
install -D -m 0755 "$mur" "$root/usr/bin/mur"
install -D -m 0755 "$roost" "$root/usr/bin/mur-roost"

step "2. the archives, filed by the packaged mur itself into the system registry"
registry="$root/usr/share/murmur/artifacts"
mkdir -p "$registry"
for z in artifacts/*.mur.zip; do
  env -i HOME="$stage/home" "$root/usr/bin/mur" publish "$z" --registry-path "$registry" >/dev/null
done
# A package's files are root's and read-only; the registry's own staging leftovers are not shipped.
find "$registry" -name '.*' -prune -exec rm -rf {} +
chmod -R u+rwX,go+rX,go-w "$registry"

step "3. the unit, its defaults, the examples, the manual pages, the docs"
install -D -m 0644 packaging/debian/mur-roost.service "$root/lib/systemd/system/mur-roost.service"
install -D -m 0644 packaging/debian/mur-roost.default "$root/etc/default/mur-roost"
# The examples beside the archives, not under /usr/share/doc: minimal images drop that tree.
examples="$root/usr/share/murmur/examples"
mkdir -p "$examples"
cp -r examples/hello examples/agent "$examples/"
rm -rf "$examples/hello/workdir" "$examples/agent/workdir"
doc="$root/usr/share/doc/murmur"
mkdir -p "$doc"
gzip -9n -c README.md >"$doc/README.md.gz"
printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: murmur\nFiles: *\nLicense: Apache-2.0\n On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.\n' >"$doc/copyright"
mkdir -p "$root/usr/share/man/man1"
for page in mur mur-roost; do
  "$root/usr/bin/mur" __man "$page" | gzip -9n >"$root/usr/share/man/man1/$page.1.gz"
done

step "4. the control files"
mkdir -p "$root/DEBIAN"
size_kb="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat >"$root/DEBIAN/control" <<CONTROL
Package: murmur
Version: $version
Architecture: $arch
Maintainer: murmur maintainers <murmur@localhost>
Installed-Size: $size_kb
Section: admin
Priority: optional
Description: hardened murmur capsule runtime (mur) and delegation referee (mur-roost)
 mur runs WASM and agent capsules inside advisory, scoped or sealed containment
 (landlock, seccomp, namespaces) and serves their A2A door; mur-roost is the
 loopback daemon that referees which capsules may spawn which others. Both are
 static binaries; the drivers' and hooks' archives are in
 /usr/share/murmur/artifacts, which mur reads when the user's registry lacks them.
CONTROL
echo "/etc/default/mur-roost" >"$root/DEBIAN/conffiles"
cat >"$root/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
# The unit is installed, not started: an operator enables it (systemctl enable --now mur-roost).
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
POSTINST
cat >"$root/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
POSTRM
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums)

step "5. the package"
mkdir -p "$out"
deb="$out/murmur_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
if [ -f "$dist/SHA256SUMS" ] && [ "$(realpath "$out")" = "$(realpath "$dist")" ]; then
  grep -v " murmur_.*\.deb$" "$dist/SHA256SUMS" >"$stage/sums" || true
  (cd "$dist" && sha256sum "$(basename "$deb")") >>"$stage/sums"
  cp "$stage/sums" "$dist/SHA256SUMS"
  (cd "$dist" && sha256sum -c SHA256SUMS >&2)
fi
dpkg-deb --info "$deb" >&2
echo "$deb"
