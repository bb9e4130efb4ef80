#!/usr/bin/env bash
# Soak test of the reference deployment (examples/server.rs), on loopback.
#
# Usage: benches/soak.sh [--debug] [--streams N] [--wave N] [--requests N]
#                        [--workers N] [--rss-baseline-wave N] [--max-seconds S]
#                        [--malloc glibc|jemalloc]
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
#
# Builds the server and the load client (examples/soak.rs, honouring
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
CLIENT_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) PROFILE=debug ;;
    --streams|--wave|--requests|--workers|--rss-baseline-wave) CLIENT_ARGS+=("$1" "${2:?$1 needs a value}"); shift ;;
    --max-seconds) MAX_SECONDS="${2:?--max-seconds needs a value}"; shift ;;
    --malloc) MALLOC="${2:?--malloc needs a value}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

fail_setup() { echo "error: $*" >&2; exit 2; }

echo "== building the server and the load client ($PROFILE)"
BUILD=(cargo build --quiet --example server --example soak)
[ "$PROFILE" = release ] && BUILD+=(--release)
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
SERVER_PID=""
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  if kill -TERM "$SERVER_PID" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# Port 0: the server prints the port it got.
env "${SERVER_ENV[@]}" RUST_LOG="${RUST_LOG:-warn}" "$SERVER" --addr 127.0.0.1:0 >"$LOG" 2>&1 &
SERVER_PID=$!
PORT=""
for _ in $(seq 100); do
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG" >&2; fail_setup "the server exited"; }
  PORT="$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)/mcp.*|\1|p' "$LOG")"
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || fail_setup "the server did not start"
echo "== server pid $SERVER_PID on http://127.0.0.1:$PORT/mcp, $MALLOC malloc (log: $LOG)"

START=$SECONDS
set +e
timeout "$MAX_SECONDS" "$CLIENT" --port "$PORT" --pid "$SERVER_PID" "${CLIENT_ARGS[@]}"
CLIENT_STATUS=$?
set -e
ELAPSED=$((SECONDS - START))
[ "$CLIENT_STATUS" -eq 124 ] && echo "the load client did not finish within $MAX_SECONDS s"
stop_server

PANICS="$(grep -c 'panicked' "$LOG" || true)"
echo "panics in the server log: $PANICS"
echo "server log: $(wc -l <"$LOG") lines at RUST_LOG=${RUST_LOG:-warn}, kept at $LOG"
echo "elapsed: ${ELAPSED} s"
if [ "$CLIENT_STATUS" -eq 0 ] && [ "$PANICS" -eq 0 ]; then
  echo "soak: ok"
else
  echo "soak: FAILED"
  exit 1
fi
