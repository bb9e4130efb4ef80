#!/usr/bin/env bash
# End-to-end load test of the reference server, layered vs --bare, on loopback.
# Needs wrk (Debian: apt-get install -y wrk).
#
# Usage: benches/e2e.sh [seconds per run (10)] [rounds (3)]
#
# Both servers run at once (layered on $PORT, --bare on $PORT+1); each round
# runs wrk (2 threads, 32 connections) once per server and workload,
# alternating which goes first, so slow drift of a shared machine hits both
# sides alike. Prints each run, each round's ratios and their median, for
# throughput and for the server's CPU time per request (utime + stime of the
# server process over the run, divided by its requests: steadier than
# throughput on a shared machine).
# Env: PORT (default 18931); builds with cargo (honours CARGO_TARGET_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
ROUNDS=${2:-3}
PORT=${PORT:-18931}
command -v wrk >/dev/null || { echo "benches/e2e.sh needs wrk (apt-get install wrk)" >&2; exit 1; }
cargo build --release --example server >/dev/null 2>&1
BIN="${CARGO_TARGET_DIR:-target}/release/examples/server"
TMP=$(mktemp -d)
PIDS=()
trap 'rm -rf "$TMP"; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

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

start() { # port args...
  local port=$1; shift
  RUST_LOG=warn "$BIN" --addr 127.0.0.1:$port "$@" >"$TMP/server-$port.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && return; sleep 0.2; done
  echo "server did not start"; cat "$TMP/server-$port.log"; exit 1
}
check() { # port method name body
  curl -s -X POST "http://127.0.0.1:$1/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H "Mcp-Method: $2" ${3:+-H "Mcp-Name: $3"} -d "$4" | head -c 300; echo
}
cpu_ticks() { # pid -> utime + stime of the process, in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}
run() { # label port pid lua -> "req/s p50_us p99_us errors server_cpu_us_per_request"
  local before after r cpu
  before=$(cpu_ticks "$3")
  wrk -t2 -c32 -d"${DUR}s" --latency -s "$4" "http://127.0.0.1:$2/mcp" >"$TMP/$1.out"
  after=$(cpu_ticks "$3")
  r=$(grep '^RESULT' "$TMP/$1.out" | cut -f2-)
  cpu=$(echo "$r" | awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v d="$DUR" \
    '{printf "%.1f", t / hz * 1e6 / ($1 * d)}')
  printf 'E2E\t%s\t%s\t%s\n' "$1" "$r" "$cpu" >&2
  echo "$r $cpu" | tr "\t" " "
}

declare -A PORTS=([layered]=$PORT [bare]=$((PORT + 1)))
declare -A SERVER
start "${PORTS[layered]}"
SERVER[layered]=${PIDS[-1]}
start "${PORTS[bare]}" --bare
SERVER[bare]=${PIDS[-1]}
for mode in layered bare; do
  echo "--- $mode: sample responses"
  check "${PORTS[$mode]}" tools/call echo "$CALL"
  check "${PORTS[$mode]}" server/discover "" "$DISC"
done
echo "E2E	label	req/s	p50_us	p99_us	errors_or_non200	server_cpu_us_per_request"

declare -A RATIOS CPU
for round in $(seq "$ROUNDS"); do
  order="layered bare"; [ $((round % 2)) -eq 0 ] && order="bare layered"
  for w in call disc; do
    lua=$CALL_LUA; [ $w = disc ] && lua=$DISC_LUA
    declare -A R=()
    for mode in $order; do R[$mode]=$(run "${mode}_${w}_$round" "${PORTS[$mode]}" "${SERVER[$mode]}" "$lua"); done
    ratio=$(awk -v l="${R[layered]}" -v b="${R[bare]}" 'BEGIN{split(l,a," "); split(b,c," "); printf "%.3f", a[1]/c[1]}')
    cpu=$(awk -v l="${R[layered]}" -v b="${R[bare]}" 'BEGIN{split(l,a," "); split(b,c," "); printf "%.3f", a[5]/c[5]}')
    printf 'E2E_ROUND\t%s\tround %s\tthroughput layered/bare=%s\tserver CPU per request layered/bare=%s\tp99 layered=%sus bare=%sus\n' \
      "$w" "$round" "$ratio" "$cpu" "$(echo "${R[layered]}" | cut -d' ' -f3)" "$(echo "${R[bare]}" | cut -d' ' -f3)"
    RATIOS[$w]+="$ratio "
    CPU[$w]+="$cpu "
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END{printf "%.3f", (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
for w in call disc; do
  printf 'E2E_RATIO\t%s\tmedian throughput layered/bare=%s\tmedian server CPU per request layered/bare=%s\tover %s rounds\n' \
    "$w" "$(echo "${RATIOS[$w]}" | median)" "$(echo "${CPU[$w]}" | median)" "$ROUNDS"
done
