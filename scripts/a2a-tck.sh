#!/usr/bin/env bash
# Run the official A2A Technology Compatibility Kit (a2aproject/a2a-tck) against a door.
#
#     scripts/a2a-tck.sh TCK_GIT_DIR MUR_BINARY 1.0|0.3 [WORK_DIR]
#
# TCK_GIT_DIR is a clone (or bare mirror) of https://github.com/a2aproject/a2a-tck; nothing of
# it is copied into this repository. Generation 1.0 runs its branch `1.0-dev` (graded
# MUST/SHOULD/MAY, JSON-RPC transport only: the door serves no gRPC or HTTP+JSON), 0.3 its tag
# `0.3.0.beta4` (every category, JSON-RPC only). The door is `MUR_BINARY run` of the TCK
# capsule (examples/tck: it answers as the TCK's scripted agent does, by messageId prefix;
# `lifecycle: {task_acceptance: queue, after_task: sleep}`) on 127.0.0.1, stopped by its PID at
# the end. scripts/a2a-tck-all.sh runs both generations and prints a summary. The TCK's own reports stay in WORK_DIR (default: a new temporary
# directory): 1.0 `tck/reports/compatibility.json`, 0.3 `tck/compliance.json`; the pytest
# output is `WORK_DIR/tck.log`, the last lines of which are printed.
#
# Needs python3 with venv; the TCK's requirements come from PyPI.
set -euo pipefail
tck_git=${1:?usage: a2a-tck.sh TCK_GIT_DIR MUR_BINARY 1.0|0.3 [WORK_DIR]}
mur=$(realpath "${2:?usage: a2a-tck.sh TCK_GIT_DIR MUR_BINARY 1.0|0.3 [WORK_DIR]}")
generation=${3:?usage: a2a-tck.sh TCK_GIT_DIR MUR_BINARY 1.0|0.3 [WORK_DIR]}
work=${4:-$(mktemp -d)}
repo=$(cd "$(dirname "$0")/.." && pwd)
case "$generation" in
    1.0) ref=1.0-dev ;;
    0.3) ref=0.3.0.beta4 ;;
    *) echo "error: the generation is 1.0 or 0.3" >&2; exit 2 ;;
esac
git_dir=$tck_git
[ -d "$tck_git/.git" ] && git_dir=$tck_git/.git

# 1. The TCK at its ref, and a virtualenv with its requirements.
mkdir -p "$work/tck" "$work/capsule" "$work/records"
chmod 700 "$work"
git --git-dir="$git_dir" archive "$ref" | tar -x -C "$work/tck"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q -e "$work/tck" pytest-html

# 2. The door.
cp "$repo/examples/tck/capsule.wasm" "$repo/examples/tck/murmur.yaml" "$work/capsule/"
MURMUR_RECORDS_DIR=$work/records MURMUR_CACHE_DIR=$work/cache \
    "$mur" run --manifest "$work/capsule/murmur.yaml" >"$work/door.out" 2>"$work/door.err" &
door=$!
trap 'kill -TERM "$door" 2>/dev/null; wait "$door" 2>/dev/null || true' EXIT
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/^murmur: url localhost:\([0-9]*\)$/\1/p' "$work/door.out")
    [ -n "$port" ] && break
    kill -0 "$door" 2>/dev/null || { cat "$work/door.err" >&2; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "error: the door never printed its url" >&2; exit 1; }

# 3. The TCK against it.
cd "$work/tck"
status=0
if [ "$generation" = 1.0 ]; then
    "$work/venv/bin/python" run_tck.py --sut-host "http://127.0.0.1:$port" --transport jsonrpc -v \
        >"$work/tck.log" 2>&1 || status=$?
else
    "$work/venv/bin/python" run_tck.py --sut-url "http://127.0.0.1:$port" --category all \
        --transports jsonrpc --compliance-report compliance.json -v >"$work/tck.log" 2>&1 || status=$?
fi
tail -n 40 "$work/tck.log"
echo "TCK $ref exit $status; reports and log in $work"
