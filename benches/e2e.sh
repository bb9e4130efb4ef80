#!/usr/bin/env bash
# End-to-end load test of the reference server, layered vs --bare, on loopback.
# Needs wrk (Debian: apt-get install -y wrk). Usage: benches/e2e.sh [seconds]
# Env: CARGO_TARGET_DIR (default /work/target-bench), PORT (default 18931).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
PORT=${PORT:-18931}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-bench}
cargo build --release --example server >/dev/null 2>&1
BIN="$CARGO_TARGET_DIR/release/examples/server"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null || true' EXIT

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
TEXT=$(head -c 1024 /dev/zero | tr '\0' 'a')
CALL="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"$TEXT\"},$META}}"
DISC="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{$META}}"

script() { # method name body -> lua file
  local f="$TMP/${1//\//_}.lua" name=""
  [ -n "$2" ] && name="wrk.headers[\"Mcp-Name\"] = \"$2\""
  cat >"$f" <<LUA
wrk.method = "POST"
wrk.path = "/mcp"
wrk.body = [[$3]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "$1"
$name
local bad = 0
response = function(status, headers, body) if status ~= 200 then bad = bad + 1 end end
done = function(summary, latency, requests)
  io.write(string.format("RESULT\t%.1f\t%.0f\t%.0f\t%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
LUA
  echo "$f"
}
CALL_LUA=$(script tools/call echo "$CALL")
DISC_LUA=$(script server/discover "" "$DISC")

start() { # args
  RUST_LOG=warn "$BIN" --addr 127.0.0.1:$PORT "$@" >"$TMP/server.log" 2>&1 &
  SPID=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && return; sleep 0.2; done
  echo "server did not start"; cat "$TMP/server.log"; exit 1
}
check() { # method name body
  curl -s -X POST "http://127.0.0.1:$PORT/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H "Mcp-Method: $1" ${2:+-H "Mcp-Name: $2"} -d "$3" >"$TMP/resp" || true
  head -c 300 "$TMP/resp"; echo
}
run() { # label lua
  wrk -t2 -c32 -d"${DUR}s" --latency -s "$2" "http://127.0.0.1:$PORT/mcp" >"$TMP/$1.out"
  local r; r=$(grep '^RESULT' "$TMP/$1.out")
  echo "$1 $r"
  echo "$r" | awk -v l="$1" -F'\t' '{printf "E2E\t%s\treq/s=%s\tp50_us=%s\tp99_us=%s\terrors_or_non200=%s\n", l, $2, $3, $4, $5}'
}

declare -A RPS P99
for mode in layered bare; do
  if [ $mode = bare ]; then start --bare; else start; fi
  echo "--- $mode: sample responses"
  check tools/call echo "$CALL"
  check server/discover "" "$DISC"
  for w in call disc; do
    lua=$CALL_LUA; [ $w = disc ] && lua=$DISC_LUA
    out=$(run "${mode}_$w" "$lua"); echo "$out"
    RPS[${mode}_$w]=$(echo "$out" | awk -F'\t' '/^E2E/{sub("req/s=","",$3); print $3}')
    P99[${mode}_$w]=$(echo "$out" | awk -F'\t' '/^E2E/{sub("p99_us=","",$5); print $5}')
  done
  kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=
done
for w in call disc; do
  awk -v w=$w -v l="${RPS[layered_$w]}" -v b="${RPS[bare_$w]}" -v pl="${P99[layered_$w]}" -v pb="${P99[bare_$w]}" \
    'BEGIN{printf "E2E_RATIO\t%s\tthroughput layered/bare=%.3f\tp99 layered=%sus bare=%sus\n", w, l/b, pl, pb}'
done
