#!/usr/bin/env bash
# Rebuild examples/tck/capsule.wasm from its source (scripts/build-guests.sh rebuilds it with
# the other guests). Needs the wasm32-wasip2 target (`rustup target add wasm32-wasip2`).
set -euo pipefail
cd "$(dirname "$0")"
target_dir=${CARGO_TARGET_DIR:-$PWD/../../target}/guests
cargo build --quiet --release --target wasm32-wasip2 --target-dir "$target_dir"
cp "$target_dir/wasm32-wasip2/release/tck.wasm" capsule.wasm
echo "examples/tck/capsule.wasm: $(wc -c < capsule.wasm) bytes"
