#!/usr/bin/env bash
# Soak test of the reference deployment (reference/examples/server.rs), on loopback.
#
# Usage: benches/soak.sh [--debug] [--streams N] [--wave N] [--requests N]
#                        [--workers N] [--rss-baseline-wave N] [--max-seconds S]
#                        [--malloc glibc|jemalloc] [--redis] [--events N]
#                        [--hold N [--http2]]
#
#   --streams N      listen streams opened and dropped, in waves (10000)
#   --wave N         streams per wave (500)
#   --requests N     mixed requests afterwards (1000000)
#   --workers N      concurrent keep-alive connections for them (16)
#   --rss-baseline-wave N
#                    the wave whose RSS the last must be within 10 % of (1)
#   --max-seconds S  the load client is stopped after S seconds (3600)
#   --malloc A       the server's allocator: glibc (default) or jemalloc,
#                    preloaded from the system (apt-get install libjemalloc2)
#                    with MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 so
#                    that freed pages go back to the OS at once and RSS
#                    follows the live heap. glibc keeps freed pages: its RSS
#                    is the high-water mark of a fragmented heap and settles
#                    20-35 % above the first wave by wave 5 to 10
#   --debug          use debug builds (default: release, built here)
#   --redis          two instances on one redis-server (started here on a
#                    free loopback port, stopped at the end; built with
#                    --features redis): the streams of each wave alternate
#                    between them, and each wave publishes --events updates
#                    (4), alternately on each instance, that every stream is
#                    entitled to: all must arrive (0 lost); both servers'
#                    RSS within 10 %
#   --hold N         instead of the waves: N listen streams opened (--wave at
#                    a time) and held open at once, each on its own
#                    connection from one of the source addresses 127.0.0.1,
#                    127.0.0.2, ... (10 000 each); GET /debug/streams must
#                    count all N; --events updates (4) that every stream is
#                    entitled to must all arrive (0 lost); prints the
#                    server's RSS per open stream and the time to open them;
#                    then all are dropped and the count must fall to 0. The
#                    server's caps are lifted to N, and the open files limit
#                    (ulimit -n) raised for the server and the client. No
#                    mixed requests unless --requests is given
#   --http2          with --hold: the streams go 200 to an HTTP/2 connection
#                    (h2c, prior knowledge) instead, for when ulimit -n cannot
#                    be raised to N (raising the hard limit needs
#                    CAP_SYS_RESOURCE)
#
# Builds the server and the load client (reference/examples/soak.rs, honouring
# CARGO_TARGET_DIR), starts the server on a free 127.0.0.1 port with
# RUST_LOG=warn, and runs the client against it:
#
# 1. listen waves: every stream acknowledged, counted by GET /debug/streams
#    while open, and 0 registered after each wave is dropped; the server's
#    RSS after the last wave within 10 % of its RSS after the first (or
#    --rss-baseline-wave); see --malloc for what RSS measures;
# 2. mixed requests (server/discover, tools/call echo, listen open/close,
#    listens with bad filters): every status and body as expected.
#
# Then stops the server (SIGTERM) and counts panics in its log. Prints
# `soak: ok` or `soak: FAILED`; exit status 0, 1 (a check failed) or 2
# (setup error).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROFILE=release
MAX_SECONDS=3600
MALLOC=glibc
REDIS=0
HOLD=0
HTTP2=0
REQUESTS_GIVEN=0
CLIENT_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) PROFILE=debug ;;
    --streams|--wave|--requests|--workers|--rss-baseline-wave) CLIENT_ARGS+=("$1" "${2:?$1 needs a value}")
      [ "$1" = --requests ] && REQUESTS_GIVEN=1
      shift ;;
    --hold) HOLD="${2:?--hold needs a value}"; CLIENT_ARGS+=("$1" "$2"); shift ;;
    --http2) HTTP2=1; CLIENT_ARGS+=("$1") ;;
    --max-seconds) MAX_SECONDS="${2:?--max-seconds needs a value}"; shift ;;
    --malloc) MALLOC="${2:?--malloc needs a value}"; shift ;;
    --redis) REDIS=1 ;;
    --events) CLIENT_ARGS+=("$1" "${2:?$1 needs a value}"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

fail_setup() { echo "error: $*" >&2; exit 2; }

case "$HOLD" in ''|*[!0-9]*) fail_setup "--hold needs a number" ;; esac
[ "$HTTP2" -eq 1 ] && [ "$HOLD" -eq 0 ] && fail_setup "--http2 goes with --hold"
[ "$HOLD" -gt 0 ] && [ "$REDIS" -eq 1 ] && fail_setup "--hold is for one instance: not with --redis"
if [ "$HOLD" -gt 0 ]; then
  [ "$REQUESTS_GIVEN" -eq 1 ] || CLIENT_ARGS+=(--requests 0)
  # Each of the server and the client holds a socket per stream (per 200
  # with --http2), besides a few of its own.
  if [ "$HTTP2" -eq 1 ]; then FILES=$((HOLD / 200 + 1024)); else FILES=$((HOLD + 1024)); fi
  HARD="$(ulimit -Hn)"
  if [ "$HARD" != unlimited ] && [ "$HARD" -lt "$FILES" ]; then
    ulimit -Hn "$FILES" 2>/dev/null \
      || fail_setup "--hold $HOLD needs $FILES open files, the hard limit is $HARD and cannot be raised here (that needs CAP_SYS_RESOURCE): try --http2"
  fi
  ulimit -Sn "$FILES"
  echo "== open files limit (ulimit -n): $(ulimit -n)"
fi

echo "== building the server and the load client ($PROFILE)"
BUILD=(cargo build --quiet --example server --example soak)
[ "$PROFILE" = release ] && BUILD+=(--release)
[ "$REDIS" -eq 1 ] && BUILD+=(--features redis)
(cd "$ROOT" && "${BUILD[@]}") || fail_setup "cargo build failed"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
SERVER="$TARGET_DIR/$PROFILE/examples/server"
CLIENT="$TARGET_DIR/$PROFILE/examples/soak"
[ -x "$SERVER" ] && [ -x "$CLIENT" ] || fail_setup "no binaries under $TARGET_DIR/$PROFILE/examples"

SERVER_ENV=()
case "$MALLOC" in
  glibc) ;;
  jemalloc)
    JEMALLOC="$(ldconfig -p | sed -n 's|.*libjemalloc\.so\.2 .*=> \(.*\)|\1|p' | head -1)"
    [ -n "$JEMALLOC" ] || fail_setup "libjemalloc.so.2 not found (apt-get install libjemalloc2)"
    SERVER_ENV=(LD_PRELOAD="$JEMALLOC" MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0) ;;
  *) fail_setup "--malloc must be glibc or jemalloc" ;;
esac

LOG="$(mktemp "${TMPDIR:-/tmp}/mcp-edge-soak.XXXXXX")"
PEER_LOG="$LOG.peer"
SERVER_PID=""
PEER_PID=""
REDIS_PID=""
stop() {
  local pid="$1"
  [ -n "$pid" ] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
stop_server() {
  stop "$SERVER_PID"; SERVER_PID=""
  stop "$PEER_PID"; PEER_PID=""
  stop "$REDIS_PID"; REDIS_PID=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start_server LOG ARGS...: starts a server on port 0 (it prints the port
# it got) and sets STARTED_PID and STARTED_PORT.
start_server() {
  local log="$1"; shift
  env "${SERVER_ENV[@]}" RUST_LOG="${RUST_LOG:-warn}" "$SERVER" --addr 127.0.0.1:0 "$@" >"$log" 2>&1 &
  STARTED_PID=$!
  STARTED_PORT=""
  for _ in $(seq 100); do
    kill -0 "$STARTED_PID" 2>/dev/null || { cat "$log" >&2; fail_setup "the server exited"; }
    STARTED_PORT="$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)/mcp.*|\1|p' "$log")"
    [ -n "$STARTED_PORT" ] && return 0
    sleep 0.1
  done
  fail_setup "the server did not start"
}

# Every stream of the load client is alice's: the per-caller cap of listen
# streams (default 64) is lifted for it.
SERVER_ARGS=(--max-streams-per-caller 1000000 --max-connections-per-peer 1000000)
# --hold N keeps N open at once: over the default cap in all (10 000).
[ "$HOLD" -gt 10000 ] && SERVER_ARGS+=(--max-streams "$HOLD")
if [ "$REDIS" -eq 1 ]; then
  command -v redis-server >/dev/null || fail_setup "redis-server is needed (apt-get install redis-server)"
  REDIS_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
  REDIS_PID=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null && break; sleep 0.1; done
  SERVER_ARGS+=(--redis "redis://127.0.0.1:$REDIS_PORT/")
  echo "== redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT"
fi
start_server "$LOG" "${SERVER_ARGS[@]}"
SERVER_PID=$STARTED_PID PORT=$STARTED_PORT
echo "== server pid $SERVER_PID on http://127.0.0.1:$PORT/mcp, $MALLOC malloc (log: $LOG)"
if [ "$REDIS" -eq 1 ]; then
  start_server "$PEER_LOG" "${SERVER_ARGS[@]}"
  PEER_PID=$STARTED_PID
  CLIENT_ARGS+=(--peer-port "$STARTED_PORT" --peer-pid "$PEER_PID")
  echo "== peer pid $PEER_PID on http://127.0.0.1:$STARTED_PORT/mcp (log: $PEER_LOG)"
fi

START=$SECONDS
set +e
timeout "$MAX_SECONDS" "$CLIENT" --port "$PORT" --pid "$SERVER_PID" "${CLIENT_ARGS[@]}"
CLIENT_STATUS=$?
set -e
ELAPSED=$((SECONDS - START))
[ "$CLIENT_STATUS" -eq 124 ] && echo "the load client did not finish within $MAX_SECONDS s"
stop_server

PANICS="$(cat "$LOG" "$PEER_LOG" 2>/dev/null | grep -c 'panicked' || true)"
echo "panics in the server log: $PANICS"
echo "server log: $(wc -l <"$LOG") lines at RUST_LOG=${RUST_LOG:-warn}, kept at $LOG"
echo "elapsed: ${ELAPSED} s"
if [ "$CLIENT_STATUS" -eq 0 ] && [ "$PANICS" -eq 0 ]; then
  echo "soak: ok"
else
  echo "soak: FAILED"
  exit 1
fi
