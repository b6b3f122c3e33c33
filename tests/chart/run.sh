#!/usr/bin/env bash
# Chart tests: render charts/ramjet with Helm's own engine (helm-python-sdk),
# lint it strictly, validate every manifest against the Kubernetes 1.33
# schemas (kubernetes-validate, strict), and assert what the chart promises.
#
# Needs python3 (3.10+) and PyPI the first time; afterwards it runs offline.
# The virtualenv lives in target/chart-venv and is rebuilt when
# tests/chart/requirements.txt changes.
#
#   tests/chart/run.sh            # everything
#   tests/chart/run.sh digest     # only tests whose name contains "digest"
#   tests/chart/run.sh --render RELEASE NAMESPACE [VALUES_JSON]
#                                 # print the rendered manifests as JSON (tests/cluster/)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/target/chart-venv"
REQ="$ROOT/tests/chart/requirements.txt"
STAMP="$VENV/.requirements"

pick_python() {
  for py in "${PYTHON:-}" python3.11 python3.12 python3.13 python3.10 python3; do
    [ -n "$py" ] || continue
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "chart tests: no python3 >= 3.10 with the venv module found" >&2
  return 1
}

# Test binaries run at once: one of them builds the virtualenv, the others wait for it.
mkdir -p "$ROOT/target"
exec 8>"$ROOT/target/.chart-venv.lock"
flock 8
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQ" "$STAMP"; then
  PY="$(pick_python)"
  echo "chart tests: creating $VENV with $("$PY" --version 2>&1)" >&2
  rm -rf "$VENV"
  mkdir -p "$ROOT/target"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQ"
  cp "$REQ" "$STAMP"
fi

flock -u 8

cd "$ROOT"
if [ "${1:-}" = "--render" ]; then
  shift
  exec "$VENV/bin/python" "$ROOT/tests/chart/render.py" "$@"
fi
exec "$VENV/bin/python" "$ROOT/tests/chart/test_chart.py" "$@"
