// One fixed sequence on the official TypeScript SDK
// (@modelcontextprotocol/sdk 1.32.2), as alice. The SDK speaks up to
// 2025-11-25: the legacy era only (initialize, a session,
// `resources/subscribe`, updates on the session's GET stream).
//
// Usage: node typescript_sdk.mjs URL SDK_DIR
//
//   SDK_DIR  the folder whose node_modules holds the SDK
//
// Connects with `Authorization: Bearer alice-token`, then: lists tools, calls
// `echo`, lists resources, reads demo://users/alice/notes, subscribes to
// alice's notes, calls `touch_resource` on them, and waits for the update.
// Prints its transcript on stdout, one line per step,
// `STEP <step> | <what it saw>`, normalized (no session ids, no timings, the
// resources' version counters as N), as tests/proxy/clients/python_sdk.py
// does. A step that threw prints `STEP <step> | error <what>`; a step whose
// prerequisite failed prints `STEP <step> | skipped: <why>`. Lines starting
// `INFO` are context, not transcript. Exits 0 (whatever the steps saw)
// unless the program itself broke.

import { createRequire } from 'node:module';
import { join } from 'node:path';

const [url, sdkDir] = process.argv.slice(2);
if (!url || !sdkDir) {
  console.error('usage: node typescript_sdk.mjs URL SDK_DIR');
  process.exit(2);
}
const require = createRequire(join(sdkDir, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ResourceUpdatedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');

const TOKEN = 'alice-token';
const ALICE_NOTES = 'demo://users/alice/notes';
/** Bound on each step, and on the wait for the update (ms). */
const STEP = 10_000;
const STEPS = ['connect', 'tools/list', 'tools/call echo', 'resources/list', `resources/read ${ALICE_NOTES}`,
  'subscribe', `tools/call touch_resource ${ALICE_NOTES}`, 'update heard'];

const normalize = (text) => text.replace(/version \d+/g, 'version N');
const py = (text) => {
  // The Python program prints strings with repr(); the same quoting here
  // keeps the two transcripts' shapes alike (not compared with each other).
  return text.includes("'") && !text.includes('"') ? `"${text}"` : `'${text.replace(/'/g, "\\'")}'`;
};

function describe(error) {
  const name = error?.constructor?.name ?? typeof error;
  const code = error?.code !== undefined ? ` code=${error.code}` : '';
  return `${name}${code} message=${JSON.stringify(String(error?.message ?? error))}`;
}

function within(ms, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const done = new Map();
function step(name, seen) {
  done.set(name, seen);
  console.log(`STEP ${name} | ${normalize(seen)}`);
}
const ok = (name) => done.has(name) && !/^(error|skipped)/.test(done.get(name));
function rest(why) {
  for (const name of STEPS) if (!done.has(name)) step(name, `skipped: ${why}`);
}
async function attempt(name, body) {
  try {
    step(name, await within(STEP, body()));
  } catch (error) {
    step(name, `error ${describe(error)}`);
  }
}

const heard = [];
const waiters = [];
function hear(uri) {
  heard.push(uri);
  for (const wake of waiters.splice(0)) wake();
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
});
const client = new Client({ name: 'mcp-edge-proxy-tests', version: '1.0.0' }, { capabilities: {} });
client.onerror = () => {};
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => hear(notification.params.uri));
const textOf = (result) => result.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

async function run() {
  await attempt('connect', async () => {
    await client.connect(transport);
    console.log(`INFO server capabilities ${JSON.stringify(client.getServerCapabilities())}`);
    return `protocol ${transport.protocolVersion}, server ${client.getServerVersion()?.name}`;
  });
  if (!ok('connect')) {
    rest('not connected');
    return;
  }
  await attempt(STEPS[1], async () =>
    `tools ${(await client.listTools()).tools.map((t) => t.name).sort().join(', ')}`);
  await attempt(STEPS[2], async () => {
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hello through the edge' } });
    return `isError=${result.isError ? 'True' : 'False'} text=${py(textOf(result))}`;
  });
  await attempt(STEPS[3], async () =>
    `resources ${(await client.listResources()).resources.map((r) => r.uri).sort().join(', ')}`);
  await attempt(STEPS[4], async () => {
    const { contents } = await client.readResource({ uri: ALICE_NOTES });
    return `contents ${contents.filter((c) => typeof c.text === 'string')
      .map((c) => `${c.uri} ${c.mimeType} ${py(c.text)}`).join(' | ')}`;
  });
  await attempt('subscribe', async () => {
    await client.subscribeResource({ uri: ALICE_NOTES });
    return 'resources/subscribe ok';
  });
  await attempt(STEPS[6], async () => {
    const result = await client.callTool({ name: 'touch_resource', arguments: { uri: ALICE_NOTES } });
    return `isError=${result.isError ? 'True' : 'False'} text=${py(textOf(result))}`;
  });
  if (!ok('subscribe') || !ok(STEPS[6])) {
    rest('no subscription or no touch');
    return;
  }
  const deadline = Date.now() + STEP;
  while (!heard.includes(ALICE_NOTES) && Date.now() < deadline) {
    await new Promise((resolve) => {
      waiters.push(resolve);
      setTimeout(resolve, deadline - Date.now());
    });
  }
  step('update heard', heard.includes(ALICE_NOTES)
    ? `notifications/resources/updated ${JSON.stringify(heard.slice(0, heard.indexOf(ALICE_NOTES) + 1))}`
    : `nothing for ${ALICE_NOTES} within ${STEP / 1000} s (heard ${JSON.stringify(heard)})`);
}

try {
  await run();
} catch (error) {
  console.log(`INFO program: ${describe(error)}`);
}
try {
  if (transport.sessionId) await within(5_000, transport.terminateSession());
} catch (error) {
  console.log(`INFO teardown: ${describe(error)}`);
}
await client.close().catch(() => {});
process.exit(0);
