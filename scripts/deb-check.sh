#!/usr/bin/env bash
# The Debian package on a clean Debian: a minimal root made by debootstrap (bookworm, minbase),
# `dpkg -i` of the package in it, then, as an ordinary account (uid 4242) inside that root:
# `mur doctor`, the README's hello example and its agent example (the packaged examples; the
# agent against a scripted OpenAI-compatible server on loopback instead of Ollama), with no
# publish step; then the unit's own ExecStart run as another account (as DynamicUser would run
# it) and the roost's /health, and the unit's exposure scored by `systemd-analyze security`.
# The root is entered by pivot_root in a mount namespace of its own, not by chroot: the kernel
# refuses a user namespace to a chrooted process, and `scoped`/`sealed` need one for an
# ordinary account. Needs root, debootstrap, curl, python3.
#   MURMUR_DEB_ROOT_CACHE=FILE.tar  reuse (or make) a tarball of the clean root
#   MURMUR_DEB_MIRROR=URL           the Debian mirror (default http://deb.debian.org/debian)
# Usage: scripts/deb-check.sh DEB
set -euo pipefail
cd "$(dirname "$0")/.."
deb="$(realpath "${1:?usage: scripts/deb-check.sh DEB}")"
mirror="${MURMUR_DEB_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d /tmp/murmur-debcheck.XXXXXX)"
root="$work/root"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # Every mount was made in the check's own mount namespace; none is left to cross.
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
fail() { echo "deb-check: FAIL: $*" >&2; exit 1; }
step() { printf '\n== deb-check: %s\n' "$*" >&2; }

step "1. a clean Debian root"
mkdir -p "$root"
if [ -n "${MURMUR_DEB_ROOT_CACHE:-}" ] && [ -s "$MURMUR_DEB_ROOT_CACHE" ]; then
  tar -C "$root" -xpf "$MURMUR_DEB_ROOT_CACHE"
else
  command -v debootstrap >/dev/null 2>&1 || fail "debootstrap is needed (apt-get install debootstrap)"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; fail "debootstrap"; }
  if [ -n "${MURMUR_DEB_ROOT_CACHE:-}" ]; then
    mkdir -p "$(dirname "$MURMUR_DEB_ROOT_CACHE")"
    tar -C "$root" -cpf "$MURMUR_DEB_ROOT_CACHE" .
  fi
fi
[ -x "$root/usr/bin/mur" ] && fail "the clean root already holds mur"

step "2. dpkg -i"
cp "$deb" "$root/tmp/murmur.deb"
chroot "$root" dpkg -i /tmp/murmur.deb
chroot "$root" dpkg -s murmur | grep -qx 'Status: install ok installed' || fail "dpkg -s murmur: not installed"
for f in /usr/bin/mur /usr/bin/mur-roost /lib/systemd/system/mur-roost.service /etc/default/mur-roost \
  /usr/share/man/man1/mur.1.gz /usr/share/man/man1/mur-roost.1.gz \
  /usr/share/murmur/artifacts/murmur-driver-openai/1.0.0/murmur-driver-openai-1.0.0.mur.zip; do
  [ -e "$root$f" ] || fail "the package installed no $f"
done
chroot "$root" dpkg --verify murmur || fail "dpkg --verify murmur"

step "3. the accounts: alice (an ordinary user) and the roost's"
chroot "$root" useradd --create-home --uid 4242 --shell /bin/bash alice
chroot "$root" useradd --system --no-create-home --uid 4243 --shell /usr/sbin/nologin roostuser
mkdir -p "$root/var/lib/mur-roost/artifacts"
chown -R 4243:4243 "$root/var/lib/mur-roost"
chmod 0700 "$root/var/lib/mur-roost"

step "4. a scripted OpenAI-compatible server on 127.0.0.1"
python3 scripts/mock-openai.py "$work/provider.port" "$work/provider.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$work/provider.port" ] && break; sleep 0.1; done
port="$(cat "$work/provider.port")" || fail "the mock provider did not start"

# Run a command inside the root as UID, its root made by pivot_root (see the head).
inside() {
  local uid="$1"
  shift
  unshare --mount --propagation private --fork --kill-child -- bash -c '
    set -e
    root="$1"; uid="$2"; shift 2
    mount --rbind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    mount --rbind /dev "$root/dev"
    cd "$root"
    mkdir -p .oldroot
    pivot_root . .oldroot
    umount -l /.oldroot
    rmdir /.oldroot
    home="$(getent passwd "$uid" | cut -d: -f6)"
    exec setpriv --reuid "$uid" --regid "$uid" --init-groups -- \
      env -i HOME="$home" USER="$(id -nu "$uid")" PATH=/usr/bin:/bin "$@"
  ' inside "$root" "$uid" "$@"
}

step "5. as alice: mur doctor, the hello example, the agent example"
cat >"$root/home/alice/check.sh" <<'CHECK'
set -eu
port="$1"
cd "$HOME"
echo "-- mur --version: $(mur --version)"
mur doctor | tee doctor.txt
grep -q "^  system registry /usr/share/murmur/artifacts: $2 artifacts" doctor.txt
echo "-- the hello example"
cp -r /usr/share/murmur/examples/hello hello
mur run --manifest hello/murmur.yaml --task "say hi" | tee hello.txt
grep -q '^status:  ok' hello.txt
cat hello/workdir/ses_*/out/result.txt
echo "-- the agent example, with no publish step (its driver comes from the system registry)"
[ ! -e .murmur/artifacts ] || { echo "alice has a registry of her own"; exit 1; }
cp -r /usr/share/murmur/examples/agent agent
sed -i "s#localhost:11434#127.0.0.1:$port#g" agent/murmur.yaml
scoped="$(awk '/^  classes/{f=1;next} f&&/^    scoped +yes/{print "yes"} f&&!/^    /{f=0}' doctor.txt)"
if [ "$scoped" = yes ]; then
  mur run --manifest agent/murmur.yaml --task "How many files are in this directory? Use ls." | tee agent.txt
  grep -q '^status:  ok' agent.txt
  echo "-- out/result.txt"
  cat agent/workdir/ses_*/out/result.txt
  grep -q 'The directory listing: ' agent/workdir/ses_*/out/result.txt
else
  # Where this host gives alice no scoped class, the spec's refusal.
  if mur run --manifest agent/murmur.yaml --task "x" >agent.txt 2>&1; then cat agent.txt; exit 1; fi
  grep -q 'E-CAP-003' agent.txt
  echo "scoped is not backed here for alice: refused E-CAP-003 as the spec says"
fi
CHECK
chmod 0755 "$root/home/alice/check.sh"
archives="$(find artifacts -maxdepth 1 -name '*.mur.zip' | wc -l)"
inside 4242 /bin/sh /home/alice/check.sh "$port" "$archives" || fail "the README's examples as alice"
if grep -q '^    scoped +yes' "$root/home/alice/doctor.txt"; then
  [ "$(grep -c '"tool_results": 1' "$work/provider.log")" = 1 ] || fail "the provider did not see the ls result"
fi
echo "provider requests: $(wc -l <"$work/provider.log")"

step "6. the unit's ExecStart as the roost's account, then /health"
unit="$root/lib/systemd/system/mur-roost.service"
exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
rport=$((20000 + RANDOM % 20000))
# As systemd would: MUR_ROOST_ARGS from /etc/default/mur-roost, the port moved off 7700.
args="$(. "$root/etc/default/mur-roost"; echo "$MUR_ROOST_ARGS") --port $rport"
command_line="${exec_start//\$MUR_ROOST_ARGS/$args}"
echo "ExecStart: $command_line"
# shellcheck disable=SC2086
inside 4243 $command_line >"$work/roost.log" 2>&1 &
pids+=($!)
ok=""
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$rport/health" >"$work/health.json" 2>/dev/null; then ok=1; break; fi
  sleep 0.1
done
cat "$work/roost.log" >&2
[ -n "$ok" ] || fail "mur-roost did not answer /health"
echo "mur-roost /health: $(cat "$work/health.json")"

if grep -q 'mur-roost  *would confine itself' "$root/home/alice/doctor.txt" && grep -q 'not in force' "$work/roost.log"; then
  fail "mur-roost did not confine itself under the unit's account where mur doctor says it would"
fi

if command -v systemd-analyze >/dev/null 2>&1; then
  step "7. the unit's exposure, as systemd-analyze scores it (at most 1.5 of 10)"
  systemd-analyze security --offline=yes --root="$root" --threshold=15 mur-roost.service >"$work/security.txt" 2>&1 \
    || { cat "$work/security.txt" >&2; fail "systemd-analyze security: the unit's exposure is above 1.5"; }
  tail -n 1 "$work/security.txt"
fi
echo "deb-check: ok"
