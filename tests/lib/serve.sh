# The reference deployment for the scripts that test it through HTTP
# (tests/conformance/run.sh, tests/clients/run.sh): sourced, not run.
#
# `arguments "$@"` reads --bare (BARE), --keep (KEEP) and --help;
# `fail_setup` ends the script with a setup error (2). Expects ROOT (the
# repository) and, for `serve`, NODE (a Node 22 binary, for a free port). `serve NAME` makes the results folder OUT
# (under TMPDIR, named after NAME; removed at exit unless KEEP is 1),
# builds the example (honouring CARGO_TARGET_DIR), starts it on a free
# loopback port with its log in $OUT/server.log, and waits until it
# answers; it sets OUT, URL and SERVER_PID. `stop_server` stops it (TERM,
# then KILL after 10 s); it runs at exit too, and is safe to call twice.

SERVER_PID=""
OUT=""
BARE=()
KEEP=0

# The arguments both scripts take: --bare, --keep, --help (the script's
# header comment).
arguments() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      --bare) BARE=(--bare) ;;
      --keep) KEEP=1 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
  done
}

fail_setup() { echo "error: $*" >&2; exit 2; }

cleanup() {
  stop_server
  if [ "$KEEP" -eq 0 ] && [ -n "$OUT" ]; then rm -rf "$OUT"; fi
}

serve() {
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  echo "== building the example server"
  (cd "$ROOT" && cargo build --quiet --example server) || fail_setup "cargo build failed"
  local target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
  case "$target_dir" in /*) ;; *) target_dir="$ROOT/$target_dir" ;; esac
  local server="$target_dir/debug/examples/server"
  [ -x "$server" ] || fail_setup "no server binary at $server"

  local port
  port="$("$NODE" -e '
    const server = require("net").createServer();
    server.listen(0, "127.0.0.1", () => { console.log(server.address().port); server.close(); });')"
  URL="http://127.0.0.1:$port/mcp"

  echo "== starting $server${BARE[*]:+ ${BARE[*]}} on $URL"
  RUST_LOG="${RUST_LOG:-info}" "$server" --addr "127.0.0.1:$port" "${BARE[@]}" >"$OUT/server.log" 2>&1 &
  SERVER_PID=$!
  local attempt
  for attempt in $(seq 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/server.log" >&2; fail_setup "the server exited"; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    [ "$attempt" -lt 100 ] || fail_setup "the server did not answer on port $port"
    sleep 0.1
  done
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  if kill -TERM "$SERVER_PID" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
