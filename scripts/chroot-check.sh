#!/usr/bin/env bash
# The static binaries on a host with nothing but a kernel: an empty root holding only `mur`,
# `mur-roost`, the drivers' and hooks' archives, a workdir, `/proc` and `/dev/null`; inside
# it, as an ordinary account (uid 4242), `mur doctor`, a capsule from `mur new` run to its end,
# `mur exec` under every class the root's own probe backs, and the roost's `/health` (asked
# from outside: the root shares the host's loopback). The root is entered with bubblewrap
# (pivot_root: the kernel refuses a user namespace to a chrooted process, so a chroot would
# leave only `advisory` to test), or with chroot as root where bubblewrap is not installed.
# Needs root (to make the account's files). Usage: scripts/chroot-check.sh DIST
set -euo pipefail
cd "$(dirname "$0")/.."
dist="${1:?usage: scripts/chroot-check.sh DIST (what scripts/release.sh wrote)}"
arch="$(uname -m)-unknown-linux-musl"
mur="$(ls "$dist"/mur-*-"$arch" | grep -v roost | head -n 1)"
roost="$(ls "$dist"/mur-roost-*-"$arch" | head -n 1)"
root="$(mktemp -d /tmp/murmur-chroot.XXXXXX)"
roost_pid=""
mounted=""

cleanup() {
  [ -n "$roost_pid" ] && kill "$roost_pid" 2>/dev/null || true
  if [ -n "$mounted" ]; then
    umount "$root/proc" 2>/dev/null || true
    umount "$root/dev/null" 2>/dev/null || true
  fi
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
fail() { echo "chroot-check: $*" >&2; exit 1; }

# The root: the two binaries, the archives, a home, a temp dir; nothing else.
chmod 0755 "$root"
install -m 0755 "$mur" "$root/mur"
install -m 0755 "$roost" "$root/mur-roost"
mkdir -p "$root/proc" "$root/dev" "$root/tmp" "$root/home" "$root/artifacts"
chmod 1777 "$root/tmp"
cp artifacts/*.mur.zip "$root/artifacts/"
touch "$root/dev/null"
# What `mur exec` may run in there: `mur` itself, the one program the root holds.
printf 'name: exec-check\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [mur]\n' >"$root/home/exec.yaml"
# There is no env in the root: the environment is cleared on the way in.
if command -v bwrap >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; then
  chown -R 4242:4242 "$root/home"
  enter=("$(command -v setpriv)" --reuid 4242 --regid 4242 --clear-groups --
    "$(command -v bwrap)" --bind "$root" / --proc /proc --dev-bind /dev/null /dev/null --die-with-parent --)
  echo "chroot-check: entering the root with bubblewrap as uid 4242"
else
  mount -t proc proc "$root/proc"
  mount --bind /dev/null "$root/dev/null"
  mounted=1
  enter=("$(command -v chroot)" "$root")
  echo "chroot-check: no bubblewrap: entering the root with chroot as root (advisory only)"
fi
inside() { env -i HOME=/home TMPDIR=/tmp PATH=/ "${enter[@]}" "$@"; }

echo "== mur doctor"
inside /mur doctor | tee "$root/tmp/doctor.txt"
classes="$(awk '/^  classes/{f=1;next} f&&/^    [a-z]+ +yes/{print $1} f&&!/^    /{f=0}' "$root/tmp/doctor.txt")"
[ -n "$classes" ] || fail "mur doctor named no class"

echo "== mur new, mur run"
inside /mur new hello /home/hello >/dev/null
inside /mur run --manifest /home/hello/murmur.yaml --task hi | tee "$root/tmp/run.txt"
grep -q '^status:  ok' "$root/tmp/run.txt" || fail "the hello capsule did not end ok"

for class in $classes; do
  echo "== mur exec --containment $class"
  out="$(inside /mur exec --manifest /home/exec.yaml --containment "$class" -- mur --version 2>&1)" \
    || fail "mur exec under $class: $out"
  echo "$out"
done

echo "== mur-roost /health"
port=$((20000 + RANDOM % 20000))
inside /mur-roost --port "$port" --registry-path /home/registry >"$root/tmp/roost.txt" 2>&1 &
roost_pid=$!
for _ in $(seq 1 50); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
    echo "mur-roost on 127.0.0.1:$port: /health 200"
    exit 0
  fi
  sleep 0.1
done
cat "$root/tmp/roost.txt" >&2
fail "mur-roost did not answer /health"
