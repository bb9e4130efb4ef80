#!/usr/bin/env bash
# Fan-out end to end, on loopback: the reference server (reference/examples/server.rs)
# against a floor of bare hyper and tokio (benches/fanout_floor.rs) that
# writes the same bytes.
#
# Usage: benches/fanout.sh [streams N (1000)] [updates K (50)] [rounds (4)]
#
# Builds both servers and the load client (benches/fanout.rs) in release,
# honouring CARGO_TARGET_DIR; raises `ulimit -n`; starts both servers on
# free 127.0.0.1 ports (the reference server with RUST_LOG=warn and its
# stream caps raised to N for one caller); runs the client, which opens N
# listen streams on each server in turn, sends K updates one at a time and
# times each stream's arrival (see benches/fanout.rs); stops both servers
# on exit. Env: WAIT_SECS, the bound on each update's delivery (10);
# MAX_SECONDS, when the client is stopped (1800); INTERLEAVE=1, both
# servers' streams open at once and the updates sent to each in turn
# (`fanout --interleave`: pairs a second apart instead of rounds).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STREAMS=${1:-1000}
UPDATES=${2:-50}
ROUNDS=${3:-4}
WAIT_SECS=${WAIT_SECS:-10}
MAX_SECONDS=${MAX_SECONDS:-1800}

echo "== building (release)"
# shellcheck source=benches/fanout-bins.sh
. "$ROOT/benches/fanout-bins.sh"

# Each side holds N sockets, and the client N more (2 N interleaved).
INTERLEAVE=${INTERLEAVE:-}
NOFILE=$((STREAMS + 1000))
[ -n "$INTERLEAVE" ] && NOFILE=$((2 * STREAMS + 100))
ulimit -n "$NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge "$NOFILE" ] || { echo "error: ulimit -n $(ulimit -n) < $NOFILE" >&2; exit 2; }

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

start() { # name binary args... -> sets PORT_<name>, PID_<name>
  local name=$1 bin=$2 port
  shift 2
  port=$(free_port)
  RUST_LOG=warn "$bin" --addr "127.0.0.1:$port" "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    if grep -q '^listening on' "$TMP/$name.log"; then
      printf -v "PORT_$name" %s "$port"
      printf -v "PID_$name" %s "${PIDS[-1]}"
      return
    fi
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "error: $name did not start:" >&2
  cat "$TMP/$name.log" >&2
  exit 2
}
start reference "$SERVER" --max-streams "$STREAMS" --max-streams-per-caller "$STREAMS" \
  --max-connections-per-peer "$((STREAMS + 100))"
start floor "$FLOOR"
echo "== reference on $PORT_reference (pid $PID_reference), floor on $PORT_floor (pid $PID_floor); $(git rev-parse --short HEAD), $(nproc) cores"
timeout "$MAX_SECONDS" "$CLIENT" --reference "$PORT_reference:$PID_reference" \
  --floor "$PORT_floor:$PID_floor" --streams "$STREAMS" --updates "$UPDATES" \
  --rounds "$ROUNDS" --wait-secs "$WAIT_SECS" ${INTERLEAVE:+--interleave}
