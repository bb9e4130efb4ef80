# Sourced by benches/fanout.sh and benches/fanout-misses.sh (with ROOT set
# and the working directory there): builds the reference server, the floor
# and the load client in release, honouring CARGO_TARGET_DIR, and sets
# SERVER, FLOOR and CLIENT to them; defines free_port.
cargo build --quiet --release --example server
EXES=$(cargo bench --no-run --quiet --bench fanout_floor --bench fanout \
  --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
FLOOR=$(echo "$EXES" | grep '/fanout_floor-')
CLIENT=$(echo "$EXES" | grep '/fanout-')
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
SERVER="$TARGET_DIR/release/examples/server"
for bin in "$SERVER" "$FLOOR" "$CLIENT"; do
  [ -x "$bin" ] || { echo "error: no binary $bin" >&2; exit 2; }
done

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
