#!/usr/bin/env bash
# Runs the test suite; pytest's exit code 5 ("no tests collected") is a failure, not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$rc"
