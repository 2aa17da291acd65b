#!/usr/bin/env bash
# Create the virtualenv the tests' Python side runs in: the official A2A Python SDK (a2a-sdk
# 1.3.0) that tests/door/a2a_sdk.rs drives through tests/sdk/a2a_client.py, and the official
# OpenTelemetry protobuf definitions (opentelemetry-proto 1.45.2) with which
# tests/sdk/otlp_check.py parses what the OTel hook sends, for tests/agent/agent_otel.rs:
#
#     scripts/a2a-sdk-venv.sh [VENV_DIR]      # default: target/a2a-sdk-venv
#
# Beside it, VENV_DIR-0.3 holds the SDK's last 0.3 release (a2a-sdk 0.3.26), a client of the
# 0.3 generation only that reads the agent card without an A2A-Version header, for the test
# that the card a door serves by default is one a 0.3 client reads (tests/sdk/a2a_files_03.py).
#
# The SDK's client needs only its base requirements (httpx, protobuf, pydantic, json-rpc,
# google-api-core, googleapis-common-protos, packaging, culsans); its extras are for the
# server side (http-server, fastapi, grpc, sql ...) and are not installed; opentelemetry-proto
# needs only protobuf, which both share. Idempotent: a venv that already imports both, at
# these versions, is left as it is. Needs python3 >= 3.10 with the venv
# module (on Debian: `apt-get install python3-venv`).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-target/a2a-sdk-venv}"
version=1.3.0
otel_version=1.45.2
version03=0.3.26
python="${PYTHON:-python3}"

installed() {
    [ -x "$venv/bin/python3" ] && "$venv/bin/python3" - "$version" "$otel_version" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import a2a.client  # the client imports cleanly, not just the metadata is present
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
sys.exit(0 if (version("a2a-sdk"), version("opentelemetry-proto")) == tuple(sys.argv[1:3]) else 1)
EOF
}

installed03() {
    [ -x "$venv-0.3/bin/python3" ] && "$venv-0.3/bin/python3" - "$version03" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import a2a.client  # noqa: F401
sys.exit(0 if version("a2a-sdk") == sys.argv[1] else 1)
EOF
}

# The 0.3 client in a venv of its own (made anew when it is not whole).
sdk03() {
    installed03 && { echo "a2a-sdk $version03 already in $venv-0.3"; return 0; }
    rm -rf "$venv-0.3"
    "$python" -m venv "$venv-0.3"
    "$venv-0.3/bin/python3" -m pip install --quiet --disable-pip-version-check "a2a-sdk==$version03"
    installed03 || { echo "error: a2a-sdk $version03 did not install into $venv-0.3" >&2; return 1; }
    echo "a2a-sdk $version03 installed in $venv-0.3"
}

if installed; then
    echo "a2a-sdk $version and opentelemetry-proto $otel_version already in $venv"
    sdk03
    exit 0
fi
if ! command -v "$python" >/dev/null; then
    echo "error: $python not found; install Python 3 (Debian: apt-get install python3 python3-venv)" >&2
    exit 1
fi
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "error: $python has no working venv module (ensurepip missing);" \
        "on Debian/Ubuntu: apt-get install python3-venv" >&2
    exit 1
fi
# A half-made venv (interrupted run, other Python) is made anew.
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "a2a-sdk==$version" \
    "opentelemetry-proto==$otel_version"
if ! installed; then
    echo "error: a2a-sdk $version and opentelemetry-proto $otel_version did not install into $venv" >&2
    exit 1
fi
echo "a2a-sdk $version and opentelemetry-proto $otel_version installed in $venv"
sdk03
