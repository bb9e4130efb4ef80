#!/usr/bin/env bash
# Instructions per request of the reference server, layered vs --bare, under
# callgrind: repeatable where wall-clock load runs on a shared machine are not.
# Needs valgrind and curl.
#
# Usage: benches/server-ir.sh [requests (1200)]
#
# For each workload (tools/call echo with a 1 KiB text, server/discover) and
# each mode, the server runs under `valgrind --tool=callgrind` twice: once
# answering BASE requests and once answering the given number, all sent in
# order on one keep-alive connection by one curl. The difference of the two
# runs' instruction totals, divided by the difference of their request
# counts, is the server's cost per request without its start-up and
# shutdown. Prints one IR line per run and one IR_RATIO line per workload.
# A larger BASE also leaves the first requests' warm-up out
# (`BASE=1200 benches/server-ir.sh 3200`).
# Env: PORT (default 18961), BASE (default 200); builds with cargo (honours
# CARGO_TARGET_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1200}
BASE=${BASE:-200}
PORT=${PORT:-18961}
[ "$N" -gt "$BASE" ] || { echo "requests must be more than $BASE"; exit 1; }
cargo build --release --example server >/dev/null 2>&1
BIN="${CARGO_TARGET_DIR:-target}/release/examples/server"
TMP=$(mktemp -d)
SERVER=""
trap 'rm -rf "$TMP"; [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true' EXIT

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
TEXT=$(head -c 1024 /dev/zero | tr '\0' 'a')
printf '%s' "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"$TEXT\"},$META}}" >"$TMP/call.json"
printf '%s' "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{$META}}" >"$TMP/disc.json"

config() { # workload count -> curl config sending count requests in order
  local method=tools/call name='header = "Mcp-Name: echo"'
  [ "$1" = disc ] && method=server/discover name=""
  for i in $(seq "$2"); do
    [ "$i" -gt 1 ] && echo next
    cat <<CFG
url = "http://127.0.0.1:$PORT/mcp"
request = "POST"
header = "Content-Type: application/json"
header = "Accept: application/json, text/event-stream"
header = "MCP-Protocol-Version: 2026-07-28"
header = "Mcp-Method: $method"
$name
data-binary = "@$TMP/$1.json"
output = "/dev/null"
write-out = "%{http_code}\n"
CFG
  done
}

total() { # mode workload count -> instructions of the whole server run
  local args=(--addr "127.0.0.1:$PORT") out="$TMP/$1-$2-$3.out" statuses
  [ "$1" = bare ] && args+=(--bare)
  RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" "${args[@]}" \
    >"$TMP/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 120); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.5; done
  config "$2" "$3" >"$TMP/curl.cfg"
  statuses=$(curl -s -K "$TMP/curl.cfg" | sort | uniq -c | tr -s ' ')
  kill -INT "$SERVER"
  wait "$SERVER" || true
  SERVER=""
  if [ "$statuses" != " $3 200" ]; then
    echo "expected $3 responses 200, got:$statuses" >&2
    exit 1
  fi
  callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done {gsub(",", "", $1); print $1; done = 1}'
}

for w in call disc; do
  declare -A PER=()
  for mode in layered bare; do
    small=$(total "$mode" "$w" "$BASE")
    large=$(total "$mode" "$w" "$N")
    PER[$mode]=$(( (large - small) / (N - BASE) ))
    printf 'IR\t%s\t%s\t%s Ir per request\n' "$w" "$mode" "${PER[$mode]}"
  done
  awk -v l="${PER[layered]}" -v b="${PER[bare]}" -v w="$w" \
    'BEGIN {printf "IR_RATIO\t%s\tlayered/bare=%.3f\tlayered-bare=%d Ir per request\n", w, l / b, l - b}'
done
