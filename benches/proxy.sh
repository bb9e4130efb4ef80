#!/usr/bin/env bash
# mcp-edge-proxy against nginx, on loopback, in one run.
#
# Usage: benches/proxy.sh [seconds per run (5)] [rounds (5)] [streams (10000)] [updates (20)] [fan-out rounds (6)]
#
# 1. Forwarding. The upstream is the reference server with --bare (an rmcp
#    server). In front of it, on the same CPU (taskset -c 1, so each runs
#    one worker: nginx `worker_processes 1`, the proxy's tokio runtime one
#    thread), nginx as a plain reverse proxy (HTTP/1.1 keep-alive to the
#    upstream, `proxy_buffering off`) and mcp-edge-proxy without [hub];
#    the upstream and wrk share CPU 0. Each round, in turn (alternating
#    the order): wrk -c16 --latency on each of direct, nginx and the proxy
#    (tools/call echo as alice: requests per second and the median
#    latency under that load), then wrk -c1 --latency on each (the median
#    latency of one request at a time). Per round: throughput proxy /
#    nginx, and added median latency over direct, proxy / nginx, under
#    load and one at a time; each figure is the median of the rounds. The
#    goals: throughput >= 0.9 (aim 1.0), added latency under load <= 1.2.
# 2. Fan-out. mcp-edge-proxy with [hub] (upstream the same bare server)
#    against the reference server (layered, its own hub): benches/fanout.rs
#    opens N streams on each in turn and sends K updates, to the proxy as a
#    POST /publish, to the reference server as a tools/call of
#    touch_resource; the ratio of the last stream's arrival, proxy /
#    reference, is the median of the rounds (goal <= 1.1), and the proxy's
#    RSS per open stream (goal <= 13 KiB).
#
# Needs wrk, nginx and taskset (Debian: wrk, nginx, util-linux; installed
# when missing, as root). Builds in release (honours CARGO_TARGET_DIR).
# Prints FORWARD_RUN / FORWARD_ROUND / FORWARD_RATIO lines, then the
# fan-out client's FANOUT_* lines. Env: WAIT_SECS (fan-out bound per
# update, 20).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DUR=${1:-5}
ROUNDS=${2:-5}
STREAMS=${3:-10000}
UPDATES=${4:-20}
FANOUT_ROUNDS=${5:-6}
WAIT_SECS=${WAIT_SECS:-20}

need() { # command package
  command -v "$1" >/dev/null && return
  [ "$(id -u)" -eq 0 ] || { echo "error: $1 is needed (apt-get install $2)" >&2; exit 2; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
need wrk wrk
need nginx nginx
need taskset util-linux

echo "== building (release)"
# shellcheck source=benches/fanout-bins.sh
. "$ROOT/benches/fanout-bins.sh"
cargo build --quiet --release -p mcp-edge-proxy
PROXY="$TARGET_DIR/release/mcp-edge-proxy"

NOFILE=$((2 * STREAMS + 1000))
ulimit -n "$NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

wait_for() { # log line
  for _ in $(seq 100); do
    grep -q "$2" "$1" 2>/dev/null && return
    sleep 0.1
  done
  echo "error: no '$2' in $1:" >&2
  cat "$1" >&2
  exit 2
}

UP=$(free_port)
RUST_LOG=warn taskset -c 0 "$SERVER" --addr "127.0.0.1:$UP" --bare \
  --max-connections-per-peer 100000 >"$TMP/upstream.log" 2>&1 &
PIDS+=($!)
wait_for "$TMP/upstream.log" '^listening on'

NGINX=$(free_port)
mkdir -p "$TMP/nginx/logs"
cat >"$TMP/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  upstream mcp { server 127.0.0.1:$UP; keepalive 64; }
  server {
    listen 127.0.0.1:$NGINX;
    location /mcp {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host 127.0.0.1:$UP;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 3600s;
    }
  }
}
CONF
taskset -c 1 nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

config() { # listen extra -> a proxy configuration
  cat <<TOML
listen = "127.0.0.1:$1"
upstream = "http://127.0.0.1:$UP/mcp"
[capabilities]
tools = {}
resources = {}
[[caller]]
token = "alice-token"
principal = "alice"
[[allow]]
principals = ["alice"]
uri_prefixes = ["demo://users/alice/"]
[connections]
max_per_peer = 100000
$2
TOML
}
EDGE=$(free_port)
config "$EDGE" "" >"$TMP/proxy.toml"
RUST_LOG=warn taskset -c 1 "$PROXY" --config "$TMP/proxy.toml" >"$TMP/proxy.log" 2>&1 &
PIDS+=($!)
wait_for "$TMP/proxy.log" '^listening on'
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$NGINX") 2>/dev/null && break; sleep 0.1; done

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
cat >"$TMP/call.lua" <<LUA
wrk.method = "POST"
wrk.path = "/mcp"
wrk.body = [[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},$META}}]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
wrk.headers["Authorization"] = "Bearer alice-token"
function response(status, headers, body)
  if status ~= 200 then io.stderr:write("status " .. status .. "\n") end
end
LUA

# One wrk run on PORT with CONNECTIONS: "requests/s median-latency-us".
measure() { # port connections
  local out
  out=$(taskset -c 0 wrk -t1 -c"$2" -d"${DUR}s" --latency -s "$TMP/call.lua" \
    "http://127.0.0.1:$1/mcp" 2>"$TMP/wrk.err")
  if [ -s "$TMP/wrk.err" ]; then echo "error: wrk: $(sort -u "$TMP/wrk.err")" >&2; exit 1; fi
  echo "$out" | awk '
    /^Requests\/sec/ { rps = $2 }
    $1 == "50%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
      p50 = (u == "ms" ? v * 1000 : (u == "s" ? v * 1e6 : v)) }
    END { print rps, p50 }'
}

declare -A TARGET=([direct]=$UP [nginx]=$NGINX [proxy]=$EDGE)
THROUGHPUT=()
LOADED=()
ALONE=()
added() { awk -v p="$1" -v n="$2" -v d="$3" 'BEGIN { printf "%.3f", (p - d) / (n - d) }'; }
for round in $(seq "$ROUNDS"); do
  order=(direct nginx proxy)
  [ $((round % 2)) -eq 0 ] && order=(proxy nginx direct)
  declare -A RPS=() P50=() ONE=()
  for name in "${order[@]}"; do read -r "RPS[$name]" "P50[$name]" <<<"$(measure "${TARGET[$name]}" 16)"; done
  for name in "${order[@]}"; do read -r _ "ONE[$name]" <<<"$(measure "${TARGET[$name]}" 1)"; done
  for name in direct nginx proxy; do
    printf 'FORWARD_RUN\tround %s\t%-6s\t%8.0f req/s\tp50 %6.0f us (16 connections)\tp50 %5.0f us (one)\n' \
      "$round" "$name" "${RPS[$name]}" "${P50[$name]}" "${ONE[$name]}"
  done
  t=$(awk -v p="${RPS[proxy]}" -v n="${RPS[nginx]}" 'BEGIN { printf "%.3f", p / n }')
  l=$(added "${P50[proxy]}" "${P50[nginx]}" "${P50[direct]}")
  a=$(added "${ONE[proxy]}" "${ONE[nginx]}" "${ONE[direct]}")
  printf 'FORWARD_ROUND\tround %s\tthroughput proxy/nginx %s\tadded p50 proxy/nginx %s under load, %s one at a time\n' \
    "$round" "$t" "$l" "$a"
  THROUGHPUT+=("$t")
  LOADED+=("$l")
  ALONE+=("$a")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
printf 'FORWARD_RATIO\tthroughput proxy/nginx %s\tadded p50 proxy/nginx %s under load, %s one at a time\t(medians of %s rounds)\n' \
  "$(median "${THROUGHPUT[@]}")" "$(median "${LOADED[@]}")" "$(median "${ALONE[@]}")" "$ROUNDS"

# --- 2. Fan-out, [hub] ------------------------------------------------------
kill "${PIDS[-1]}" 2>/dev/null || true
HUB=$(free_port)
PUBLISH=$(free_port)
TOKEN=benchmark-publish-token
config "$HUB" "[hub]
publish = \"127.0.0.1:$PUBLISH\"
publish_token = \"$TOKEN\"
max_streams = $STREAMS
max_streams_per_caller = $STREAMS" >"$TMP/hub.toml"
RUST_LOG=warn "$PROXY" --config "$TMP/hub.toml" >"$TMP/hub.log" 2>&1 &
PIDS+=($!)
HUB_PID=$!
wait_for "$TMP/hub.log" '^publish at'
REF=$(free_port)
RUST_LOG=warn "$SERVER" --addr "127.0.0.1:$REF" --max-streams "$STREAMS" \
  --max-streams-per-caller "$STREAMS" --max-connections-per-peer "$((STREAMS + 100))" \
  >"$TMP/reference.log" 2>&1 &
PIDS+=($!)
REF_PID=$!
wait_for "$TMP/reference.log" '^listening on'
echo "== fan-out: proxy on $HUB (publish $PUBLISH), reference on $REF; $(git rev-parse --short HEAD), $(nproc) cores"
"$CLIENT" --proxy "$HUB:$HUB_PID" --publish "$PUBLISH:$TOKEN" --reference "$REF:$REF_PID" \
  --streams "$STREAMS" --updates "$UPDATES" --rounds "$FANOUT_ROUNDS" --wait-secs "$WAIT_SECS"
