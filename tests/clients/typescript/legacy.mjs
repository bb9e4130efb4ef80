// The mcp-edge reference deployment, driven by the official TypeScript SDK
// (@modelcontextprotocol/sdk 1.32.2), which speaks up to 2025-11-25: the
// legacy era only (`initialize`, a session, `resources/subscribe`, updates
// on the session's GET stream).
//
// Usage: node legacy.mjs URL SDK_DIR
//
//   SDK_DIR  the folder whose node_modules holds the SDK (run.sh installs it
//            into its cache folder, not next to this file)
//
// Prints one line per check, `PASS name` or `FAIL name: reason`, and exits 0
// when every check passed, 1 otherwise. Every check is reported exactly once:
// a check whose prerequisite failed (no session, say) fails with that reason.

import { createRequire } from 'node:module';
import { join } from 'node:path';

const [url, sdkDir] = process.argv.slice(2);
if (!url || !sdkDir) {
  console.error('usage: node legacy.mjs URL SDK_DIR');
  process.exit(2);
}
const require = createRequire(join(sdkDir, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ResourceUpdatedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');

const ALICE = 'alice-token';
const BOB = 'bob-token';
const README = 'demo://public/readme';
const LOGO = 'demo://public/static/logo';
const ALICE_NOTES = 'demo://users/alice/notes';
const BOB_NOTES = 'demo://users/bob/notes';
const WATCHED = 'test://watched-resource';
const README_TEXT = 'This server is the mcp-edge reference deployment.';
const UNAUTHORIZED_MESSAGE = 'Unauthorized: unknown bearer token';

/** Bound on one check, and on any wait for a notification that must come (ms). */
const STEP = 15_000;
/** How long to watch, after the control update, for a notification that must not come (ms). */
const QUIET = 1_500;

class Failed extends Error {}

function expect(condition, reason) {
  if (!condition) throw new Failed(reason);
}

function describe(error) {
  if (error instanceof Failed) return error.message;
  const name = error?.constructor?.name ?? typeof error;
  const code = error?.code !== undefined ? ` code=${error.code}` : '';
  return `${name}${code} message=${JSON.stringify(String(error?.message ?? error))}`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function within(ms, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failed(`timed out after ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

let failures = 0;
function line(name, reason) {
  if (reason === undefined) {
    console.log(`PASS ${name}`);
  } else {
    failures += 1;
    console.log(`FAIL ${name}: ${reason}`);
  }
}

/** Runs one check within STEP; any error fails it, never the program. */
async function check(name, body) {
  try {
    await within(STEP, body());
    line(name);
    return true;
  } catch (error) {
    line(name, describe(error));
    return false;
  }
}

function skip(names, reason) {
  for (const name of names) line(name, reason);
}

/** The `notifications/resources/updated` one client received, in arrival order. */
class Inbox {
  constructor() {
    this.uris = [];
    this.waiters = [];
  }

  add(uri) {
    this.uris.push(uri);
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** The index of the first update for `uri`, waiting up to STEP. */
  async waitFor(uri) {
    const deadline = Date.now() + STEP;
    while (!this.uris.includes(uri)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Failed(`no update for ${uri} within ${STEP / 1000} s (got ${JSON.stringify(this.uris)})`);
      await new Promise((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, left);
      });
    }
    return this.uris.indexOf(uri);
  }
}

/** No update for `uri` arrived before the control update (index `control`), nor in the QUIET after it. */
async function expectQuiet(inbox, uri, control) {
  const early = inbox.uris.slice(0, control).filter((seen) => seen === uri);
  expect(early.length === 0, `an update for ${uri} arrived before the control update: ${JSON.stringify(inbox.uris)}`);
  await sleep(QUIET);
  expect(!inbox.uris.includes(uri), `an update for ${uri} arrived: ${JSON.stringify(inbox.uris)}`);
}

const opened = [];

/** A client as `token`, not yet connected; `inbox` collects its resource updates. */
function client(token, { inbox, strict = false } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const sdk = new Client(
    { name: 'mcp-edge-clients', version: '1.0.0' },
    { capabilities: {}, enforceStrictCapabilities: strict },
  );
  // Transport errors also reject the request they belong to; that is what the checks look at.
  sdk.onerror = () => {};
  if (inbox) {
    sdk.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
      inbox.add(notification.params.uri);
    });
  }
  const entry = { sdk, transport };
  opened.push(entry);
  return entry;
}

async function closeAll() {
  for (const { sdk, transport } of opened.splice(0)) {
    try {
      if (transport.sessionId) await within(5_000, transport.terminateSession());
    } catch {
      // The session ends with the server anyway.
    }
    await sdk.close().catch(() => {});
  }
}

const textOf = (result) => result.content.filter((block) => block.type === 'text').map((block) => block.text).join('');

async function legacy() {
  const prefix = 'typescript legacy:';
  const names = {
    initialize: `${prefix} initialize (2025-11-25, resources.subscribe, tools)`,
    tools: `${prefix} tools/list has echo, touch_resource, complete_task`,
    echo: `${prefix} tools/call echo`,
    list: `${prefix} resources/list shows alice the public resources and her notes, not bob's`,
    read: `${prefix} resources/read ${README}`,
    subOk: `${prefix} resources/subscribe ${ALICE_NOTES} succeeds`,
    subRefused: `${prefix} resources/subscribe ${BOB_NOTES} refused with -32002, URI not named`,
    bobUpdate: `${prefix} bob touches ${BOB_NOTES}, bob's subscription hears it`,
    aliceUpdate: `${prefix} alice touches ${ALICE_NOTES}, alice's subscription hears it`,
    noLeak: `${prefix} alice hears nothing about ${BOB_NOTES}`,
  };
  const aliceInbox = new Inbox();
  const bobInbox = new Inbox();
  const alice = client(ALICE, { inbox: aliceInbox });

  let connected = false;
  const initialized = await check(names.initialize, async () => {
    await alice.sdk.connect(alice.transport);
    connected = true;
    const version = alice.transport.protocolVersion;
    expect(version === '2025-11-25', `negotiated ${JSON.stringify(version)}`);
    const caps = alice.sdk.getServerCapabilities();
    expect(caps?.resources?.subscribe === true, `resources capability is ${JSON.stringify(caps?.resources)}`);
    expect(caps?.tools !== undefined, 'no tools capability');
  });
  // Checks after a failed one still run when there is a session to run them on.
  if (!initialized && !connected) {
    skip(Object.entries(names).filter(([key]) => key !== 'initialize').map(([, name]) => name),
      'no session: initialize failed');
    return;
  }

  await check(names.tools, async () => {
    const listed = (await alice.sdk.listTools()).tools.map((tool) => tool.name);
    const missing = ['echo', 'touch_resource', 'complete_task'].filter((name) => !listed.includes(name));
    expect(missing.length === 0, `missing ${JSON.stringify(missing)} in ${JSON.stringify(listed)}`);
  });

  await check(names.echo, async () => {
    const result = await alice.sdk.callTool({ name: 'echo', arguments: { text: 'hello from typescript' } });
    expect(!result.isError, `isError: ${JSON.stringify(result.content)}`);
    expect(textOf(result) === 'hello from typescript', `answered ${JSON.stringify(textOf(result))}`);
  });

  await check(names.list, async () => {
    const uris = (await alice.sdk.listResources()).resources.map((resource) => resource.uri);
    const expected = [README, LOGO, ALICE_NOTES, WATCHED];
    expect(JSON.stringify([...uris].sort()) === JSON.stringify([...expected].sort()),
      `listed ${JSON.stringify(uris)}, expected ${JSON.stringify(expected)}`);
  });

  await check(names.read, async () => {
    const texts = (await alice.sdk.readResource({ uri: README })).contents.map((content) => content.text);
    expect(JSON.stringify(texts) === JSON.stringify([README_TEXT]), `read ${JSON.stringify(texts)}`);
  });

  await check(names.subOk, async () => {
    await alice.sdk.subscribeResource({ uri: ALICE_NOTES });
  });

  await check(names.subRefused, async () => {
    let refusal;
    try {
      await alice.sdk.subscribeResource({ uri: BOB_NOTES });
    } catch (error) {
      refusal = error;
    }
    expect(refusal !== undefined, 'the subscription was accepted');
    // The JSON-RPC code, as the SDK exposes it (McpError.code); a transport
    // error carries the HTTP status there instead.
    expect(refusal.code === -32002, `${describe(refusal)}; expected an McpError with code -32002`);
    const said = `${refusal.message} ${JSON.stringify(refusal.data ?? null)}`;
    expect(!said.includes(BOB_NOTES) && !said.includes('bob'),
      `the error names the resource: ${describe(refusal)} data=${JSON.stringify(refusal.data)}`);
  });

  // Bob, in a session of his own, subscribes to and touches his notes first;
  // then alice touches hers. Her update is the control: once it is in,
  // nothing about bob's notes may have come before it, nor in the QUIET after.
  const bob = client(BOB, { inbox: bobInbox });
  let bobTouched = false;
  await check(names.bobUpdate, async () => {
    await bob.sdk.connect(bob.transport);
    await bob.sdk.subscribeResource({ uri: BOB_NOTES });
    const result = await bob.sdk.callTool({ name: 'touch_resource', arguments: { uri: BOB_NOTES } });
    expect(!result.isError, `touch_resource isError: ${JSON.stringify(textOf(result))}`);
    bobTouched = true;
    await bobInbox.waitFor(BOB_NOTES);
  });

  let control;
  const heard = await check(names.aliceUpdate, async () => {
    const result = await alice.sdk.callTool({ name: 'touch_resource', arguments: { uri: ALICE_NOTES } });
    expect(!result.isError, `touch_resource isError: ${JSON.stringify(textOf(result))}`);
    control = await aliceInbox.waitFor(ALICE_NOTES);
  });
  if (!heard) {
    skip([names.noLeak], 'no control update to wait for');
  } else if (!bobTouched) {
    skip([names.noLeak], "bob's notes were never touched");
  } else {
    await check(names.noLeak, () => expectQuiet(aliceInbox, BOB_NOTES, control));
  }
}

async function strict() {
  const prefix = 'typescript strict capabilities:';
  const names = {
    connect: `${prefix} initialize`,
    tools: `${prefix} tools/list`,
    call: `${prefix} tools/call echo`,
    list: `${prefix} resources/list`,
    read: `${prefix} resources/read ${README}`,
    subscribe: `${prefix} resources/subscribe ${ALICE_NOTES}`,
  };
  const alice = client(ALICE, { strict: true });
  if (!(await check(names.connect, () => alice.sdk.connect(alice.transport)))) {
    skip(Object.values(names).slice(1), 'no session: initialize failed');
    return;
  }
  await check(names.tools, async () => {
    const listed = (await alice.sdk.listTools()).tools.map((tool) => tool.name);
    expect(listed.includes('echo'), `listed ${JSON.stringify(listed)}`);
  });
  await check(names.call, async () => {
    const result = await alice.sdk.callTool({ name: 'echo', arguments: { text: 'strict' } });
    expect(!result.isError && textOf(result) === 'strict', `answered ${JSON.stringify(result.content)}`);
  });
  await check(names.list, async () => {
    const uris = (await alice.sdk.listResources()).resources.map((resource) => resource.uri);
    expect(uris.includes(ALICE_NOTES), `listed ${JSON.stringify(uris)}`);
  });
  await check(names.read, async () => {
    const texts = (await alice.sdk.readResource({ uri: README })).contents.map((content) => content.text);
    expect(JSON.stringify(texts) === JSON.stringify([README_TEXT]), `read ${JSON.stringify(texts)}`);
  });
  await check(names.subscribe, () => alice.sdk.subscribeResource({ uri: ALICE_NOTES }));
}

async function invalidToken() {
  await check('typescript invalid token (initialize) shows the server\'s 401 message', async () => {
    const stranger = client('wrong');
    let refusal;
    try {
      await stranger.sdk.connect(stranger.transport);
    } catch (error) {
      refusal = error;
    }
    expect(refusal !== undefined, 'connected with an unknown token');
    expect(String(refusal.message).includes(UNAUTHORIZED_MESSAGE), `the SDK shows ${describe(refusal)}`);
    expect(refusal.code !== -32603, `a generic internal error: ${describe(refusal)}`);
  });
}

const started = Date.now();
for (const scenario of [legacy, strict, invalidToken]) {
  try {
    await scenario();
  } catch (error) {
    line(`typescript ${scenario.name}: scenario`, describe(error));
  }
}
await closeAll();
console.error(`# typescript: ${failures} failed, ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failures ? 1 : 0);
