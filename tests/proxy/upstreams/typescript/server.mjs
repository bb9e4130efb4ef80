// A deliberately leaky MCP server on the official TypeScript SDK
// (@modelcontextprotocol/server 2.4.0, mounted on node:http with
// @modelcontextprotocol/node 2.1.2). Run it with Node 22.
//
// Usage: node server.mjs --port N [--max-seconds N] [--max-requests N]
//                        [--publish URL --publish-token TOKEN] [--sdk-dir DIR]
//
//   --sdk-dir  the npm folder holding the SDK (install.sh installs it into
//              ${UPSTREAMS_DIR:-$HOME/.cache/mcp-edge-upstreams}/node, the
//              default, not next to this file)
//
// Serves Streamable HTTP at http://127.0.0.1:N/mcp, both eras the SDK offers:
// 2026-07-28 (`server/discover`, `subscriptions/listen`, per-request `_meta`;
// stateless) through the SDK's createMcpHandler, and the legacy `initialize`
// era (2025-11-25 and earlier) through its sessionful
// WebStandardStreamableHTTPServerTransport (`Mcp-Session-Id`, notifications
// on the session's GET stream), routed with the SDK's isLegacyRequest as its
// documentation shows.
//
// Resources (text/plain, each with a version counter): demo://public/readme,
// demo://users/alice/notes, demo://users/bob/notes. Everyone may list, read,
// subscribe to and listen for all of them: this server does no authorization
// at all, by design (a proxy in front of it restricts what each caller hears).
//
// Tools: `echo {text}` answers the text; `touch_resource {uri}` bumps the
// resource's counter and announces the change: to every
// `subscriptions/listen` stream that asked for that URI and every legacy
// session that subscribed to it, or, with --publish, only by one HTTP POST of
// `notifications/resources/updated` to URL (bearer TOKEN) per change.
//
// Bounded: exits by itself after --max-seconds (default 600) or after
// --max-requests HTTP requests (default 100000). Prints one line
// `listening on http://127.0.0.1:N/mcp` to stdout once it accepts requests.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

function usage(message) {
  console.error(`error: ${message}`);
  console.error('usage: node server.mjs --port N [--max-seconds N] [--max-requests N] '
    + '[--publish URL --publish-token TOKEN] [--sdk-dir DIR]');
  process.exit(2);
}

let options;
try {
  ({ values: options } = parseArgs({
    options: {
      port: { type: 'string' },
      'max-seconds': { type: 'string', default: '600' },
      'max-requests': { type: 'string', default: '100000' },
      publish: { type: 'string' },
      'publish-token': { type: 'string' },
      'sdk-dir': {
        type: 'string',
        default: join(process.env.UPSTREAMS_DIR || join(homedir(), '.cache', 'mcp-edge-upstreams'), 'node'),
      },
    },
  }));
} catch (error) {
  usage(error.message);
}
const port = Number(options.port);
const maxSeconds = Number(options['max-seconds']);
const maxRequests = Number(options['max-requests']);
const publishUrl = options.publish;
const publishToken = options['publish-token'];
if (!Number.isInteger(port) || port < 1 || port > 65535) usage('--port N is required (1-65535)');
if (!(maxSeconds > 0)) usage('--max-seconds must be positive');
if (!Number.isInteger(maxRequests) || maxRequests < 1) usage('--max-requests must be a positive integer');
if ((publishUrl === undefined) !== (publishToken === undefined)) usage('--publish and --publish-token go together');

// The SDK lives in the install folder, not next to this file: load it (the
// CommonJS builds, so that the server package and its Node adapter share one
// instance) through a require rooted there.
const require = createRequire(join(options['sdk-dir'], 'package.json'));
const {
  McpServer,
  WebStandardStreamableHTTPServerTransport,
  createMcpHandler,
  hostHeaderValidationResponse,
  isLegacyRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
} = require('@modelcontextprotocol/server');
const { toNodeHandler } = require('@modelcontextprotocol/node');
const { z } = require('zod');

const log = (...parts) => console.error('upstream:', ...parts);

const RESOURCES = {
  'demo://public/readme': { name: 'readme', body: 'Public readme: anyone may read this.' },
  'demo://users/alice/notes': { name: 'alice-notes', body: "Alice's private notes." },
  'demo://users/bob/notes': { name: 'bob-notes', body: "Bob's private notes." },
};
const versions = new Map(Object.keys(RESOURCES).map((uri) => [uri, 1]));
const textOf = (uri) => `${uri} (version ${versions.get(uri)}): ${RESOURCES[uri].body}`;

/** Legacy sessions by Mcp-Session-Id: { transport, server, uris }. */
const sessions = new Map();

/** Announces a change: the SDK's own ways, or one POST to the hub. */
async function announce(uri) {
  if (publishUrl !== undefined) {
    try {
      const response = await fetch(publishUrl, {
        method: 'POST',
        headers: { Authorization: `Bearer ${publishToken}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } }),
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
      log(`published ${uri}: HTTP ${response.status}`);
    } catch (error) {
      log(`publishing ${uri} to ${publishUrl} failed: ${error?.cause?.message ?? error?.message ?? error}`);
    }
    return;
  }
  // 2026-07-28: every open subscriptions/listen stream whose filter names the
  // URI (the SDK acknowledges whatever URIs a listener asks for).
  modern.notify.resourceUpdated(uri);
  // Legacy: every session that sent resources/subscribe for it, on its GET
  // stream (the SDK drops the notification when that stream is not open).
  for (const [sid, session] of sessions) {
    if (!session.uris.has(uri)) continue;
    try {
      await session.server.server.sendResourceUpdated({ uri });
    } catch (error) {
      log(`notifying legacy session ${sid.slice(0, 8)} failed: ${error?.message ?? error}`);
    }
  }
}

/**
 * One server instance: the same surface for both eras. `session` is the
 * legacy session it serves (resources/subscribe is a legacy-only method).
 */
function buildServer(session) {
  const server = new McpServer(
    { name: 'mcp-edge-upstream-typescript', version: '1.0.0' },
    { capabilities: { resources: { subscribe: true } } },
  );
  for (const [uri, { name }] of Object.entries(RESOURCES)) {
    server.registerResource(name, uri, { mimeType: 'text/plain' }, async () => ({
      contents: [{ uri, mimeType: 'text/plain', text: textOf(uri) }],
    }));
  }
  server.registerTool(
    'echo',
    { description: 'Answers the text it is given.', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  server.registerTool(
    'touch_resource',
    {
      description: "Bumps a resource's version counter and announces the change.",
      inputSchema: z.object({ uri: z.string() }),
    },
    async ({ uri }) => {
      if (!versions.has(uri)) {
        return { content: [{ type: 'text', text: `unknown resource ${JSON.stringify(uri)}` }], isError: true };
      }
      versions.set(uri, versions.get(uri) + 1);
      await announce(uri);
      return { content: [{ type: 'text', text: `touched ${uri}: version ${versions.get(uri)}` }] };
    },
  );
  if (session !== undefined) {
    server.server.setRequestHandler('resources/subscribe', async (request) => {
      session.uris.add(request.params.uri);
      log(`legacy session ${String(session.transport.sessionId).slice(0, 8)} subscribed to ${request.params.uri}`);
      return {};
    });
    server.server.setRequestHandler('resources/unsubscribe', async (request) => {
      session.uris.delete(request.params.uri);
      return {};
    });
  }
  return server;
}

const onerror = (error) => log(`sdk: ${error?.message ?? error}`);

// 2026-07-28: a fresh instance per request; listen streams are the handler's.
const modern = createMcpHandler(() => buildServer(undefined), { legacy: 'reject', onerror });

const jsonRpcError = (status, code, message) =>
  Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status });

// The legacy era, sessionful: one transport and one server per session.
async function legacyFetch(request) {
  const sid = request.headers.get('mcp-session-id');
  if (sid !== null) {
    const session = sessions.get(sid);
    if (session === undefined) return jsonRpcError(404, -32001, 'Session not found');
    return session.transport.handleRequest(request);
  }
  const session = { uris: new Set() };
  session.transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => { sessions.set(id, session); },
    onsessionclosed: (id) => { sessions.delete(id); },
  });
  session.transport.onclose = () => {
    if (session.transport.sessionId !== undefined) sessions.delete(session.transport.sessionId);
  };
  session.server = buildServer(session);
  await session.server.connect(session.transport);
  const response = await session.transport.handleRequest(request);
  // Anything but a successful initialize opens no session.
  if (session.transport.sessionId === undefined) await session.server.close();
  return response;
}

const handler = toNodeHandler({
  async fetch(request) {
    const rejected = hostHeaderValidationResponse(request, localhostAllowedHostnames())
      ?? originValidationResponse(request, localhostAllowedOrigins());
    if (rejected !== undefined) return rejected;
    if (new URL(request.url).pathname !== '/mcp') return new Response('Not Found\n', { status: 404 });
    return (await isLegacyRequest(request)) ? legacyFetch(request) : modern.fetch(request);
  },
}, { onerror });

function exit(reason) {
  log(`${reason}; exiting`);
  process.exit(0);
}

let requests = 0;
const http = createServer((req, res) => {
  requests += 1;
  if (requests > maxRequests) {
    res.writeHead(503, { 'Content-Type': 'text/plain' }).end('request limit reached\n');
    return;
  }
  if (requests === maxRequests) {
    // The last request is served; the process ends when its answer has.
    http.close();
    res.on('close', () => exit(`--max-requests ${maxRequests} reached`));
  }
  // toNodeHandler writes the head of a response but leaves Node to send it
  // with the first body chunk: a legacy GET stream would show its client no
  // status line until the first notification or keep-alive (15 s). An event
  // stream's head goes out at once instead (the Python SDK's server does the
  // same); nothing else about the response changes.
  const writeHead = res.writeHead;
  res.writeHead = function (status, headers) {
    const result = writeHead.call(this, status, headers);
    if (/^text\/event-stream/i.test(String(headers?.['content-type'] ?? ''))) this.flushHeaders();
    return result;
  };
  handler(req, res).catch((error) => {
    log(`request failed: ${error?.message ?? error}`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
http.on('error', (error) => {
  log(`cannot listen on 127.0.0.1:${port}: ${error.message}`);
  process.exit(1);
});
setTimeout(() => exit(`--max-seconds ${maxSeconds} reached`), maxSeconds * 1000).unref();
http.listen(port, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${port}/mcp`);
});
