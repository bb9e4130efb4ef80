#!/usr/bin/env bash
# What one Redis node handles for the hub's bus: PUBLISH and SPUBLISH rates
# with subscribers attached, the memory of a subscription, and the bytes a
# classic PUBLISH costs on a cluster's node-to-node bus.
#
# Usage: benches/pubsub.sh [--requests N] [--runs N] [--held N]
#
#   --requests N  publications per redis-benchmark run (200000)
#   --runs N      runs of each measurement (2)
#   --held N      channels a client holds subscriptions to while the rates
#                 are measured (100000), named like RedisBus's (32 bytes)
#
# Needs redis-server, redis-cli and redis-benchmark (7.x: SPUBLISH) and
# python3 (the subscribers). Every server is started on a free 127.0.0.1
# port with --save '' --appendonly no (cluster nodes in a directory of
# their own) and stopped at the end.
#
# 1. standalone: used_memory before and after one client subscribes to
#    --held channels; then `redis-benchmark -n N -P 16 PUBLISH ch MSG`
#    with 0, 1 and 10 subscribers on `ch`, and the server's CPU time per
#    publication (INFO cpu, before and after): a rate on this shared
#    machine depends on its load, CPU time per publication much less.
# 2. one-node cluster (--cluster-enabled yes, CLUSTER ADDSLOTSRANGE 0
#    16383): the same with SSUBSCRIBE and SPUBLISH, and PUBLISH again.
# 3. two-node cluster (all slots on the first): PUBLISH into the first;
#    the bytes its node-to-node link to the second carried (ss), over the
#    publications, CLUSTER INFO's publish counters on both, and the CPU
#    time of both nodes per publication.
# 4. three-node cluster: the same CPU times, with two peers to copy to.
#
# MSG is the message RedisBus publishes for an update of a URI of the
# simulation's tree (examples/scale_out.rs), 114 bytes.
set -euo pipefail

REQUESTS=200000
RUNS=2
HELD=100000
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) REQUESTS="${2:?--requests needs a value}"; shift ;;
    --runs) RUNS="${2:?--runs needs a value}"; shift ;;
    --held) HELD="${2:?--held needs a value}"; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "pubsub: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

MSG='{"v":1,"from":"1f2e3-187d4c2a9b3e5f10","seq":1000,"change":{"type":"resource_updated","uri":"file:///s42/s7/s99"}}'
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# free_port: a port whose cluster bus port (+10000) is free too.
free_port() {
  python3 - <<'EOF'
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); port = a.getsockname()[1]
    if port + 10000 > 65535:
        continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", port + 10000))
    except OSError:
        continue
    print(port)
    break
EOF
}

# start_redis PORT [ARGS...]: starts a server and waits for its PING.
start_redis() {
  local port="$1"; shift
  mkdir -p "$WORK/$port"
  (cd "$WORK/$port" && exec redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no "$@" >"$WORK/$port/log" 2>&1) &
  PIDS+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "pubsub: redis-server on $port did not start" >&2; exit 2
}

# subscriber PORT VERB N|CHANNEL: a client that subscribes (VERB is
# SUBSCRIBE or SSUBSCRIBE) to N channels named like RedisBus's, or to one
# CHANNEL, then reads and drops everything. Returns once every subscription
# is confirmed.
subscriber() {
  local ready="$WORK/ready.$RANDOM$RANDOM"
  python3 - "$1" "$2" "$3" "$ready" <<'EOF' &
import socket, sys
port, verb, what, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
names = [f"mcp:r:{i:026d}".encode() for i in range(int(what))] if what.isdigit() else [what.encode()]
s = socket.create_connection(("127.0.0.1", port))
v = verb.encode()
# SSUBSCRIBE takes channels of one slot only: one command each.
for at in range(0, len(names), 1000):
    s.sendall(b"".join(b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(v), v, len(n), n) for n in names[at:at + 1000]))
word = v.lower() + b"\r\n"
seen, tail = 0, b""
while seen < len(names):
    chunk = s.recv(1 << 20)
    if not chunk:
        sys.exit("connection closed")
    seen += (tail + chunk).count(word)
    tail = chunk[-16:]
open(ready, "w").close()
while s.recv(1 << 20):
    pass
EOF
  PIDS+=($!)
  for _ in $(seq 600); do
    [ -e "$ready" ] && return 0
    sleep 0.1
  done
  echo "pubsub: a subscriber did not get its confirmations" >&2; exit 2
}

used_memory() { redis-cli -p "$1" INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'; }

# cpu PORT: the server's CPU seconds so far (user + system, every thread).
cpu() {
  redis-cli -p "$1" INFO cpu | tr -d '\r' | sed -n 's/^used_cpu_\(user\|sys\)://p' | paste -sd+ | bc
}

# rate PORT LABEL COMMAND CHANNEL [PEERS]: RUNS redis-benchmark runs, each
# with the server's CPU time per publication (and that of each of PEERS, a
# space-separated list of ports).
rate() {
  local port="$1" label="$2" command="$3" channel="$4" peers="${5:-}"
  for run in $(seq "$RUNS"); do
    local line before after peer extra=""
    local -A peer_before=()
    before="$(cpu "$port")"
    for peer in $peers; do peer_before[$peer]="$(cpu "$peer")"; done
    line="$(redis-benchmark -p "$port" -n "$REQUESTS" -P 16 -q "$command" "$channel" "$MSG" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1)"
    after="$(cpu "$port")"
    for peer in $peers; do
      extra="$extra; a peer $(echo "scale=2; ($(cpu "$peer") - ${peer_before[$peer]}) * 1000000 / $REQUESTS" | bc) us"
    done
    echo "$label, run $run: ${line#*: }; server CPU $(echo "scale=2; ($after - $before) * 1000000 / $REQUESTS" | bc) us per publication$extra"
  done
}

# held PORT VERB: the memory of HELD subscriptions of one client.
held() {
  local before after
  before="$(used_memory "$1")"
  subscriber "$1" "$2" "$HELD"
  after="$(used_memory "$1")"
  echo "$2 of $HELD channels by one client: used_memory $before -> $after ($(( (after - before) / HELD )) bytes per subscription)"
}

# rates PORT SUBSCRIBE PUBLISH: the rate with 0, 1 and 10 subscribers on ch.
rates() {
  local port="$1" subscribe="$2" publish="$3"
  rate "$port" "$publish, 0 subscribers" "$publish" nobody
  subscriber "$port" "$subscribe" ch
  rate "$port" "$publish, 1 subscriber" "$publish" ch
  for _ in $(seq 9); do subscriber "$port" "$subscribe" ch; done
  rate "$port" "$publish, 10 subscribers" "$publish" ch
}

echo "redis: $(redis-server --version)"
echo "message: ${#MSG} bytes; $REQUESTS publications per run, -P 16, 50 clients; nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== 1. standalone"
P="$(free_port)"
start_redis "$P"
held "$P" SUBSCRIBE
rates "$P" SUBSCRIBE PUBLISH

echo "== 2. one-node cluster"
P="$(free_port)"
start_redis "$P" --cluster-enabled yes --cluster-config-file nodes.conf
redis-cli -p "$P" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
for _ in $(seq 100); do
  redis-cli -p "$P" CLUSTER INFO | grep -q 'cluster_state:ok' && break
  sleep 0.1
done
held "$P" SSUBSCRIBE
rates "$P" SSUBSCRIBE SPUBLISH
rate "$P" "PUBLISH in the one-node cluster, 0 subscribers" PUBLISH nobody

# cluster PORTS...: a classic cluster of these nodes, every slot on the
# first, once every node knows every other and the first has a link to each.
cluster() {
  local first="$1" node
  for node in "$@"; do
    start_redis "$node" --cluster-enabled yes --cluster-config-file nodes.conf
  done
  redis-cli -p "$first" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
  shift
  for node in "$@"; do redis-cli -p "$first" CLUSTER MEET 127.0.0.1 "$node" >/dev/null; done
  for _ in $(seq 300); do
    local ready=1
    redis-cli -p "$first" CLUSTER INFO | grep -q 'cluster_state:ok' || ready=0
    for node in "$first" "$@"; do
      redis-cli -p "$node" CLUSTER INFO | grep -q "cluster_known_nodes:$(( $# + 1 ))" || ready=0
    done
    for node in "$@"; do
      [ "$(ss -tnH state established dst "127.0.0.1:$((node + 10000))" | wc -l)" -ge 1 ] || ready=0
    done
    [ "$ready" = 1 ] && break
    sleep 0.1
  done
  sleep 1
}
counter() { redis-cli -p "$1" CLUSTER INFO | tr -d '\r' | sed -n "s/^$2://p"; }

echo "== 3. two-node cluster: a PUBLISH broadcast"
A="$(free_port)"
B="$(free_port)"
cluster "$A" "$B"
link_bytes() {
  ss -tinH state established dst "127.0.0.1:$((B + 10000))" | grep -o 'bytes_acked:[0-9]*' | cut -d: -f2 | paste -sd+ | bc
}
sent_before="$(counter "$A" cluster_stats_messages_publish_sent)"
bytes_before="$(link_bytes)"
start="$(date +%s.%N)"
rate "$A" "PUBLISH into node 1 of 2, 0 subscribers" PUBLISH nobody "$B"
seconds="$(echo "$(date +%s.%N) - $start" | bc)"
sleep 1  # until the last copies are acknowledged
bytes_after="$(link_bytes)"
sent_after="$(counter "$A" cluster_stats_messages_publish_sent)"
received="$(counter "$B" cluster_stats_messages_publish_received)"
copies=$((sent_after - sent_before))
echo "node-to-node: $copies publish messages sent by node 1 (node 2 received $received), $((bytes_after - bytes_before)) bytes on its link to node 2 in ${seconds} s: $(( (bytes_after - bytes_before) / (copies > 0 ? copies : 1) )) bytes per copy"

echo "== 4. three-node cluster: a PUBLISH broadcast to two peers"
A="$(free_port)"
B="$(free_port)"
C="$(free_port)"
cluster "$A" "$B" "$C"
rate "$A" "PUBLISH into node 1 of 3, 0 subscribers" PUBLISH nobody "$B $C"
echo "node-to-node: node 1 sent $(counter "$A" cluster_stats_messages_publish_sent) publish messages; nodes 2 and 3 received $(counter "$B" cluster_stats_messages_publish_received) and $(counter "$C" cluster_stats_messages_publish_received)"
