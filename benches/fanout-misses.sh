#!/usr/bin/env bash
# The fan-out of benches/fanout.sh under callgrind with its cache
# simulation: instructions and cache misses per delivered event, reference
# server against the floor, repeatable where the wall-clock ratio of a
# shared machine swings by ±15 % from round to round. Needs valgrind.
#
# Usage: benches/fanout-misses.sh [streams N (2000)]
#
# Each server runs under `valgrind --tool=callgrind --cache-sim=yes`, the
# other one natively, while the load client (benches/fanout.rs, one round)
# opens N listen streams on it and sends updates: once 2 updates, once 12.
# The difference of the two runs' totals over 10 N is the cost of one
# event on one stream, start-up, opening and shutdown left out (the ten
# triggers' own cost, a `tools/call` through rmcp for the reference
# server, is in it: about 330 instructions an event at N = 2 000). The
# simulated caches are 32 KiB, 8-way for I1 and D1 and a 512 KiB, 8-way
# last level (one core's L2 on the machine of BENCHMARKS.md): with
# thousands of streams open, each line an event reads of its stream's
# state misses there. Prints one FANOUT_MISSES line per server and the
# ratio: Ir, D1 misses (D1mr + D1mw) and LL misses (DLmr + DLmw) per event.
# `callgrind_annotate` on the kept files (printed) tells which functions
# they are in. Env: KEEP, a directory to keep the callgrind files in.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STREAMS=${1:-2000}
command -v valgrind >/dev/null || { echo "error: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }

# shellcheck source=benches/fanout-bins.sh
. "$ROOT/benches/fanout-bins.sh"

NOFILE=$((STREAMS + 1000))
ulimit -n "$NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
TMP=${KEEP:-$(mktemp -d)}
mkdir -p "$TMP"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT

wait_listening() { # port
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "error: nothing listens on $1" >&2
  exit 2
}

# run NAME UPDATES: callgrind of NAME (reference or floor) through one
# client round of UPDATES updates, into $TMP/NAME.UPDATES.
run() {
  local name=$1 updates=$2 measured other port other_port args=()
  port=$(free_port)
  other_port=$(free_port)
  if [ "$name" = reference ]; then
    measured=$SERVER other=$FLOOR
    # No keep-alive comes during the run, however slow valgrind makes it.
    args=(--max-streams "$STREAMS" --max-streams-per-caller "$STREAMS" --keep-alive-secs 3600
      --max-connections-per-peer "$((STREAMS + 100))")
  else
    measured=$FLOOR other=$SERVER
  fi
  RUST_LOG=warn valgrind --tool=callgrind --cache-sim=yes \
    --I1=32768,8,64 --D1=32768,8,64 --LL=524288,8,64 \
    --callgrind-out-file="$TMP/$name.$updates" \
    "$measured" --addr "127.0.0.1:$port" "${args[@]}" >"$TMP/$name.$updates.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  local other_args=()
  [ "$name" = floor ] && other_args=(--max-streams "$STREAMS" --max-streams-per-caller "$STREAMS")
  RUST_LOG=warn "$other" --addr "127.0.0.1:$other_port" "${other_args[@]}" >/dev/null 2>&1 &
  local other_pid=$!
  PIDS+=("$other_pid")
  wait_listening "$port"
  wait_listening "$other_port"
  local pair=(--reference "$port:$pid" --floor "$other_port:$other_pid")
  [ "$name" = floor ] && pair=(--reference "$other_port:$other_pid" --floor "$port:$pid")
  "$CLIENT" "${pair[@]}" --streams "$STREAMS" --updates "$updates" --rounds 1 \
    --wait-secs 120 >"$TMP/$name.$updates.client" 2>&1 ||
    { cat "$TMP/$name.$updates.client" >&2; exit 1; }
  # SIGINT: each server ends normally, and callgrind writes its file.
  kill -INT "$pid" "$other_pid"
  wait "$pid" 2>/dev/null || true
  wait "$other_pid" 2>/dev/null || true
}

# per_event NAME: "Ir D1 LL" per event, from the two runs' summaries.
per_event() {
  python3 - "$TMP/$1.12" "$TMP/$1.2" "$STREAMS" <<'EOF'
import sys
def totals(path):
    events = None
    for line in open(path):
        if line.startswith("events:"):
            events = line.split()[1:]
        if line.startswith("summary:"):
            return dict(zip(events, map(int, line.split()[1:])))
more, fewer, streams = totals(sys.argv[1]), totals(sys.argv[2]), int(sys.argv[3])
per = {k: (more[k] - fewer[k]) / (10 * streams) for k in more}
print("%.0f %.1f %.1f" % (per["Ir"], per["D1mr"] + per["D1mw"], per["DLmr"] + per["DLmw"]))
EOF
}

echo "== fan-out under callgrind: $STREAMS streams, 2 and 12 updates; $(git rev-parse --short HEAD), $(nproc) cores"
for name in reference floor; do
  run "$name" 2
  run "$name" 12
done
read -r ref_ir ref_d1 ref_ll <<<"$(per_event reference)"
read -r floor_ir floor_d1 floor_ll <<<"$(per_event floor)"
printf 'FANOUT_MISSES\treference\tIr %s\tD1 misses %s\tLL misses %s\t(per event on one stream)\n' "$ref_ir" "$ref_d1" "$ref_ll"
printf 'FANOUT_MISSES\tfloor    \tIr %s\tD1 misses %s\tLL misses %s\n' "$floor_ir" "$floor_d1" "$floor_ll"
python3 -c "print('FANOUT_MISSES_RATIO\treference/floor\tIr %.3f\tD1 misses %.3f\tLL misses %.3f' % ($ref_ir/$floor_ir, $ref_d1/$floor_d1, $ref_ll/$floor_ll))"
[ -n "${KEEP:-}" ] && echo "callgrind files: $TMP/{reference,floor}.{2,12}"
exit 0
