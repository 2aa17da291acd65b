#!/usr/bin/env bash
# Rebuild the committed guest components (the hello example and the test fixtures) from their
# Rust sources (and two from component text, with wasm-tools). Needs the wasm32-wasip2 target (`rustup target add wasm32-wasip2`); tests and
# CI use the committed .wasm files and never run this.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="$PWD/target/guests"
for dir in examples/hello tests/fixtures/*/; do
    dir="${dir%/}"
    [ -f "$dir/Cargo.toml" ] || continue
    name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)
    echo "building $dir ($name)"
    cargo build --quiet --release --target wasm32-wasip2 \
        --manifest-path "$dir/Cargo.toml" --target-dir "$target_dir"
    cp "$target_dir/wasm32-wasip2/release/${name//-/_}.wasm" "$dir/capsule.wasm"
    echo "  $dir/capsule.wasm: $(wc -c < "$dir/capsule.wasm") bytes"
done
# Fixtures no Rust toolchain emits (several linear memories) are written in the component
# text format and assembled with wasm-tools (`cargo install --locked wasm-tools`).
for wat in tests/fixtures/*/capsule.wat; do
    echo "assembling $wat"
    wasm-tools parse "$wat" -o "${wat%.wat}.wasm"
done
echo "building benches/hello-command (a plain WASI command for wasmtime run)"
cargo build --quiet --release --target wasm32-wasip2 \
    --manifest-path benches/hello-command/Cargo.toml --target-dir "$target_dir"
cp "$target_dir/wasm32-wasip2/release/hello-command.wasm" benches/hello-command/hello-command.wasm
