#!/usr/bin/env bash
# Every callgrind row of BENCHMARKS.md (§1–§5, §8, §14) in one run: the
# instruction count (Ir) per request, event, delivered event or operation
# of each row, counted as its section says. Needs valgrind.
#
# Usage: benches/ir.sh
#        FEATURES="--features metrics" benches/ir.sh
#        CALLS=1 benches/ir.sh
#        ROWS='hub fan-out' benches/ir.sh
#
# Builds the benches (`cargo bench -p mcp-edge --no-run $FEATURES`;
# honours CARGO_TARGET_DIR), then runs each row's criterion bench id alone
# under `valgrind --tool=callgrind`, collecting inside criterion's
# `Routine::warm_up` and `Routine::bench` (`--toggle-collect`)
# with `--profile-time 1`, in a process of its own, from a copy of the
# bench binary at a fixed path and with a fixed environment (the stack's
# alignment, and so a few memcpy and malloc paths, follow their sizes).
# Prints one line per row, `<row>\t<Ir per unit>`; with CALLS=1, a third
# column: the calls counted; with ROWS, only the rows whose name matches
# that extended regex. `--profile-time 1` runs as many iterations as
# fit in one second, so that count follows the machine's speed, and a row
# whose cost per unit changes with the iterations run reads differently
# at another count. What each row counts:
#
# - pass-through (§1), capabilities rewrite (§2), listen honouring (§3):
#   the inclusive Ir of the calls of `common::block_on` over their count,
#   per request;
# - stream guard (§4) and update screen (§5): the same over the 10 000
#   events of a request, per event;
# - hub fan-out (§8): the inclusive Ir of the routine `Bencher::iter`
#   calls over its calls and the 100 events of each, per delivered event;
# - decision cache (§14): the inclusive Ir of the cache's `get` or `put`
#   that `Bencher::iter` calls over its calls, per operation.
#
# Exits non-zero when a bench is not built (a feature it requires is off)
# or a row's figure is not in its callgrind profile.
set -euo pipefail
cd "$(dirname "$0")/.."
FEATURES=${FEATURES:-}
CALLS=${CALLS:-}
ROWS=${ROWS:-}
VALGRIND=$(command -v valgrind)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# `$FEATURES` is split into cargo's arguments on purpose.
# shellcheck disable=SC2086
cargo bench -p mcp-edge --no-run --message-format=json-render-diagnostics $FEATURES \
  >"$TMP/build.json"
mkdir "$TMP/bin" "$TMP/run"
awk '/"reason":"compiler-artifact"/ && /#mcp-edge@/ && /"kind":\["bench"\]/ {
  match($0, /"name":"[^"]*"/); name = substr($0, RSTART + 8, RLENGTH - 9)
  match($0, /"executable":"[^"]*"/); exe = substr($0, RSTART + 14, RLENGTH - 15)
  print name "\t" exe
}' "$TMP/build.json" | while IFS=$'\t' read -r name exe; do
  cp "$exe" "$TMP/bin/$name"
done

# row BENCH ID COUNTED UNITS NAME: prints NAME and the Ir per unit of the
# bench id ID (a criterion filter, anchored here) of the bench BENCH.
# COUNTED is `block_on` (the calls of `common::block_on`) or an awk regex
# of the callee of `Bencher::iter` whose calls are counted; UNITS the
# units per call.
row() {
  local bench=$1 id=$2 counted=$3 units=$4 name=$5 out ir
  [[ -z "$ROWS" || "$name" =~ $ROWS ]] || return 0
  [ -x "$TMP/bin/$bench" ] || {
    echo "bench $bench not built (FEATURES='$FEATURES'; see its required-features)" >&2
    exit 1
  }
  out="$TMP/$bench.out"
  (cd "$TMP/run" && env -i NO_RATIOS=1 CRITERION_HOME="$TMP/criterion" \
    "$VALGRIND" --tool=callgrind --toggle-collect='*Routine*warm_up*' \
    --toggle-collect='*Routine*>::bench' \
    --callgrind-out-file="$out" "$TMP/bin/$bench" --bench "^$id\$" --profile-time 1) \
    >"$TMP/run.log" 2>&1 || {
    cat "$TMP/run.log" >&2
    echo "$name: $bench --bench '^$id\$' failed under callgrind" >&2
    exit 1
  }
  ir=$(callgrind_annotate --inclusive=yes --tree=calling "$out" | awk -v counted="$counted" -v units="$units" '
    function num(s) { gsub(",", "", s); return s + 0 }
    function add() {
      ir += num($1)
      match($0, /\([0-9,]+x\)/)
      calls += num(substr($0, RSTART + 1, RLENGTH - 3))
    }
    counted == "block_on" && />   [^ ]*::common::block_on \(/ { add() }
    counted != "block_on" && /\*  [^ ]*criterion::bencher::Bencher<M>::iter \[/ { iter = 1; next }
    iter && /^$/ { iter = 0 }
    iter && />   / && $0 ~ counted { add() }
    END { if (calls == 0) exit 1; printf "%.1f\t%d\n", ir / calls / units, calls }') || {
    echo "$name: no calls of $counted in $bench --bench '^$id\$'" >&2
    exit 1
  }
  [ -n "$CALLS" ] || ir=${ir%$'\t'*}
  printf '%s\t%s\n' "$name" "$ir"
  rm -f "$out"
}

# §1: pass-through of tools/call, per request.
for size in 1KiB:"1 KiB" 64KiB:"64 KiB" 4MiB:"4 MiB"; do
  for place in first last structured; do
    case $size:$place in
      4MiB*:last | 1KiB*:structured | 64KiB*:structured) continue ;;
    esac
    for variant in edge:edge both:both caps_only:"caps only" listen_only:"listen only" \
      both_unscanned:"both, scan off"; do
      row passthrough "passthrough_${size%%:*}_$place/${variant%%:*}" block_on 1 \
        "pass-through ${size#*:} $place, ${variant#*:}, Ir per request"
    done
  done
done

# §2: the capabilities rewrite, per request.
row discover rewrite_discover_json/caps block_on 1 "capabilities rewrite, discover JSON, Ir per request"
row discover rewrite_discover_sse/caps block_on 1 "capabilities rewrite, discover SSE, Ir per request"
row discover rewrite_initialize_json/caps block_on 1 "capabilities rewrite, initialize, Ir per request"

# §3: listen honouring, layered, per request.
row listen listen_10_uris/layered block_on 1 "listen honouring, layered, 10 URIs, Ir per request"
row listen listen_1000_uris/layered block_on 1 "listen honouring, layered, 1000 URIs, Ir per request"
row listen listen_1000_tasks/layered block_on 1 "listen honouring, layered, 1000 tasks, Ir per request"
row listen listen_1000_uris_1000_tasks/layered block_on 1 "listen honouring, layered, both, Ir per request"

# §4: the stream guard, 10 000 events a request.
for uris in 10 1000; do
  row listen "guard_${uris}_uris_10k_events/guarded" block_on 10000 "stream guard, $uris URIs, Ir per event"
  row listen "guard_${uris}_uris_10k_events/unguarded" block_on 10000 "stream guard unguarded, $uris URIs, Ir per event"
done

# §5: the update screen, 10 000 events a request.
for variant in bare unscreened screened; do
  row listen "screen_10k_events/$variant" block_on 10000 "update screen, $variant, Ir per event"
done

# §8: the hub's fan-out, 100 delivered events a call.
row hub hub_fanout_100_of_10k/hub 'hub::main::[{][{]closure[}][}]' 100 \
  "hub fan-out, Ir per delivered event"
row hub hub_fanout_100_of_10k/hub_behind_listen_filter 'hub::main::[{][{]closure[}][}]' 100 \
  "hub fan-out behind ListenFilterLayer, Ir per delivered event"

# §14: the decision cache, one operation a call.
for op in get_kept:"look-up of a kept decision" get_unknown:"look-up of a decision not kept" \
  put_kept:"a kept decision renewed" put_past_the_bound:"a one-off decision put past the bound"; do
  for cache in before quick_cache; do
    row decisions "decisions/${op%%:*}/$cache" '::(get|put) [(]' 1 \
      "decision cache, ${op#*:}, $cache, Ir per operation"
  done
done
