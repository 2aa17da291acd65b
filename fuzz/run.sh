#!/usr/bin/env bash
# Run one fuzz target for a number of seconds: fuzz/run.sh TARGET SECONDS
# Needs the nightly toolchain and cargo-fuzz (`cargo install --locked cargo-fuzz`).
set -euo pipefail
target=${1:?usage: fuzz/run.sh TARGET SECONDS}
seconds=${2:?usage: fuzz/run.sh TARGET SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
mkdir -p "fuzz/corpus/$target"
seeds=()
[ -d "fuzz/seeds/$target" ] && seeds=("fuzz/seeds/$target")
exec cargo +nightly fuzz run "$target" "fuzz/corpus/$target" "${seeds[@]}" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
