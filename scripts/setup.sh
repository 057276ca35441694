#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks: the toolchains' Debian packages, uv, and the locked
# Python dependencies in .venv. Idempotent: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for pkg in ${APT_PACKAGES:-}; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The node-jest toolchain: npm (Debian's, when the installed nodejs does not bring its own) and
# the Node tools pinned by toolchains/node/package-lock.json, installed there without running
# any package's scripts. Re-installed only when the lock changes; never during a test run.
if [ -f toolchains/node/package-lock.json ] && command -v node >/dev/null 2>&1; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing Debian's npm" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  lock_digest="$(sha256sum toolchains/node/package-lock.json | cut -d' ' -f1)"
  node_stamp=toolchains/node/node_modules/.autopilot-lock
  if [ "$(cat "$node_stamp" 2>/dev/null)" != "$lock_digest" ]; then
    echo "setup: installing the Node tools (npm ci in toolchains/node)" >&2
    (cd toolchains/node && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    echo "$lock_digest" >"$node_stamp"
  fi
fi

PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
# uv is run as a module of the interpreter that has it, so no PATH or shim refresh is needed.
if ! "$PYTHON" -m uv --version >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q "uv==0.13.8"
fi
# Bytecode is compiled at install time: the sandbox runs each test command with
# PYTHONDONTWRITEBYTECODE on a read-only view of the venv, so an uncompiled venv would recompile
# pytest, coverage and their imports from source on every run (half of a pytest run's time).
"$PYTHON" -m uv sync --locked --compile-bytecode --python "$PYTHON"
