#!/usr/bin/env bash
# Static release binaries for a host with no toolchain: `mur` (with the runtime) and
# `mur-roost` (without it: no wasmtime, no TLS), built for x86_64-unknown-linux-musl (and
# aarch64-unknown-linux-musl when MURMUR_RELEASE_AARCH64=1 and its linker is installed),
# copied to OUT (default dist/) with a SHA256SUMS file. Each binary is checked to be static
# (no program interpreter). Usage: scripts/release.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
targets=(x86_64-unknown-linux-musl)
if [ "${MURMUR_RELEASE_AARCH64:-0}" = 1 ]; then
  targets+=(aarch64-unknown-linux-musl)
fi

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "release: $1 is needed ($2)" >&2; exit 1; }
}
need musl-gcc "apt-get install musl-tools: ring's C is built with it"
need readelf "apt-get install binutils: to check the binaries are static"
need sha256sum "coreutils"

built="${CARGO_TARGET_DIR:-target}"
mkdir -p "$out"
rm -f "$out/SHA256SUMS"
for t in "${targets[@]}"; do
  rustup target list --installed | grep -qx "$t" || rustup target add "$t"
  echo "release: building mur and mur-roost $version for $t" >&2
  cargo build --release --locked --target "$t" --bin mur
  cargo build --release --locked --no-default-features --target "$t" --bin mur-roost
  for bin in mur mur-roost; do
    src="$built/$t/release/$bin"
    if readelf -l "$src" | grep -q 'INTERP'; then
      echo "release: $src asks for a program interpreter: it is not static" >&2
      exit 1
    fi
    cp "$src" "$out/$bin-$version-$t"
  done
done
(cd "$out" && sha256sum mur-* > SHA256SUMS && sha256sum -c SHA256SUMS >&2)
ls -l "$out"
