#!/bin/sh
# Kaitai Struct cross-check (tests/test_export_ksy.py): node + npm (Debian packages), the
# Kaitai compiler 0.11 from npm into .ci-cache/kaitai, and the Python runtime from PyPI.
# Idempotent; call it from .ci/run before pytest.
set -eu
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
DIR="${BYTEWRIGHT_KSC_DIR:-$ROOT/.ci-cache/kaitai}"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -f "$DIR/node_modules/kaitai-struct-compiler/package.json" ]; then
    mkdir -p "$DIR"
    npm install --prefix "$DIR" --no-audit --no-fund --silent kaitai-struct-compiler@0.11.0
fi
# the Python runtime is in the [test] extra; install it here too when a venv exists
PY="${PYTHON:-$ROOT/.venv/bin/python}"
if [ -x "$PY" ]; then "$PY" -m pip install -q "kaitaistruct>=0.11"; fi
echo "kaitai: compiler $(node -e "console.log(require('$DIR/node_modules/kaitai-struct-compiler').version)") in $DIR"
