#!/usr/bin/env bash
# Rebuild the committed guest components (the hello and tck examples, the test fixtures, the inference
# drivers under drivers/, the example hooks under hooks/ and the hook fixtures under
# tests/fixtures/hooks/) from their Rust sources (and two from component text, with
# wasm-tools), then repackage the committed .mur.zip artifacts. Needs the wasm32-wasip2 target
# (`rustup target add wasm32-wasip2`); tests and CI use the committed .wasm and .mur.zip files
# and never run this.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="$PWD/target/guests"
for dir in examples/hello examples/tck tests/fixtures/*/ drivers/murmur-driver-*/ hooks/*/ tests/fixtures/hooks/*/; do
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
# Package the artifacts with `mur build` (target/debug/mur, built first when absent): the two
# drivers and the example hooks into artifacts/, and the fixtures tests publish into a
# temporary registry (the hook fixtures among them) beside their sources. mur build writes
# fixed entry timestamps (1980-01-01) and a fixed murmur-build.json, so the same murmur.yaml
# and capsule.wasm give a byte-identical zip.
mur=target/debug/mur
if [ ! -x "$mur" ]; then
    echo "building $mur"
    cargo build --quiet --bin mur
fi
yaml_field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *\$/\1/p" "$2" | head -1; }
package() { # package DIR OUT_DIR
    local name version
    name=$(yaml_field name "$1/murmur.yaml")
    version=$(yaml_field version "$1/murmur.yaml")
    echo "packaging $1 -> $2/$name-$version.mur.zip"
    "$mur" build "$1" -o "$2/$name-$version.mur.zip"
}
mkdir -p artifacts
for dir in drivers/murmur-driver-*/ hooks/*/; do
    package "${dir%/}" artifacts
done
for dir in tests/fixtures/echo-tool tests/fixtures/exfil-driver tests/fixtures/hooks/*/; do
    dir="${dir%/}"
    package "$dir" "$dir"
done
# The examples' locks pin the archives just packaged (tests/cli/lock.rs checks they agree).
lockreg=$(mktemp -d)
trap 'rm -rf "$lockreg"' EXIT
for z in artifacts/*.mur.zip; do
    "$mur" publish "$z" --registry-path "$lockreg" >/dev/null
done
for m in examples/agent/*.yaml; do
    "$mur" lock --manifest "$m" --registry-path "$lockreg"
done
