"""A deliberately leaky MCP server on the official Python SDK (PyPI `mcp` 2.3.0).

Serves Streamable HTTP at http://127.0.0.1:PORT/mcp, both protocol eras the
SDK offers: 2026-07-28 (`server/discover`, `subscriptions/listen`, per-request
`_meta`; stateless) and the legacy `initialize` era (2025-11-25 and earlier,
sessions with `Mcp-Session-Id`, notifications on the GET stream).

Resources (text/plain, each with a version counter): demo://public/readme,
demo://users/alice/notes, demo://users/bob/notes. Everyone may list, read,
subscribe to and listen for all of them: this server does no authorization at
all, by design (a proxy in front of it restricts what each caller hears).

Tools: `echo {text}` answers the text; `touch_resource {uri}` bumps the
resource's counter and announces the change: to every `subscriptions/listen`
stream that asked for that URI and every legacy session that subscribed to
it, or, with `--publish URL --publish-token TOKEN`, only by one HTTP POST of
`notifications/resources/updated` to URL (bearer TOKEN) per change.

Bounded: exits by itself after --max-seconds (default 600) or after
--max-requests HTTP requests (default 100000). Prints one line
`listening on http://127.0.0.1:PORT/mcp` to stdout once it accepts requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import urllib.request
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server as LowlevelServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

log = logging.getLogger("upstream")

RESOURCES: dict[str, tuple[str, str]] = {
    # uri: (name, body)
    "demo://public/readme": ("readme", "Public readme: anyone may read this."),
    "demo://users/alice/notes": ("alice-notes", "Alice's private notes."),
    "demo://users/bob/notes": ("bob-notes", "Bob's private notes."),
}
versions: dict[str, int] = {uri: 1 for uri in RESOURCES}

TOOLS = [
    types.Tool(
        name="echo",
        description="Answers the text it is given.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    ),
    types.Tool(
        name="touch_resource",
        description="Bumps a resource's version counter and announces the change.",
        input_schema={
            "type": "object",
            "properties": {"uri": {"type": "string"}},
            "required": ["uri"],
        },
    ),
]
TOOL_SCHEMAS = {tool.name: tool.input_schema for tool in TOOLS}


def text_of(uri: str) -> str:
    _, body = RESOURCES[uri]
    return f"{uri} (version {versions[uri]}): {body}"


class Upstream:
    def __init__(self, publish_url: str | None, publish_token: str | None) -> None:
        self.publish_url = publish_url
        self.publish_token = publish_token
        # 2026-07-28: the SDK's own listen support; its ListenHandler honours
        # whatever URIs a listener asks for, whoever asks.
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        # Legacy era: resources/subscribe per session (keyed by Mcp-Session-Id).
        self.legacy: dict[str, dict[str, Any]] = {}
        self.server = LowlevelServer(
            "mcp-edge-upstream-python",
            version="1.0.0",
            get_tool_input_schema=TOOL_SCHEMAS.get,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_subscriptions_listen=self.listen,
        )

    async def list_tools(self, ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def list_resources(self, ctx: ServerRequestContext, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(name=name, uri=uri, mime_type="text/plain") for uri, (name, _) in RESOURCES.items()
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri not in RESOURCES:
            raise ValueError(f"unknown resource {uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text_of(uri))]
        )

    @staticmethod
    def session_id(ctx: ServerRequestContext) -> str | None:
        request = ctx.request
        headers = getattr(request, "headers", None)
        return headers.get("mcp-session-id") if headers is not None else None

    async def subscribe(self, ctx: ServerRequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        sid = self.session_id(ctx)
        if sid is None:
            raise ValueError("resources/subscribe needs a session (Mcp-Session-Id)")
        entry = self.legacy.setdefault(sid, {"session": ctx.session, "uris": set()})
        entry["session"] = ctx.session
        entry["uris"].add(uri)
        log.info("legacy session %s subscribed to %s", sid[:8], uri)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        sid = self.session_id(ctx)
        entry = self.legacy.get(sid or "")
        if entry is not None:
            entry["uris"].discard(str(params.uri))
        return types.EmptyResult()

    async def call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "echo":
            text = args.get("text")
            if not isinstance(text, str):
                return error_result("echo needs a string `text`")
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        if params.name == "touch_resource":
            uri = args.get("uri")
            if uri not in RESOURCES:
                return error_result(f"unknown resource {uri!r}")
            versions[uri] += 1
            await self.announce(uri)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"touched {uri}: version {versions[uri]}")]
            )
        return error_result(f"unknown tool {params.name!r}")

    async def announce(self, uri: str) -> None:
        if self.publish_url is not None:
            await anyio.to_thread.run_sync(self.publish, uri)
            return
        await self.bus.publish(ResourceUpdated(uri=uri))
        for entry in list(self.legacy.values()):
            if uri in entry["uris"]:
                # Goes out on the session's standalone (GET) stream; dropped
                # by the SDK when that stream is not open.
                await entry["session"].send_resource_updated(uri)

    def publish(self, uri: str) -> None:
        body = json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
        ).encode()
        request = urllib.request.Request(
            self.publish_url,
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {self.publish_token}", "Content-Type": "application/json"},
        )
        # Straight to URL: no proxy from the environment.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=10) as response:
                log.info("published %s: HTTP %s", uri, response.status)
        except Exception as error:  # log and go on
            log.warning("publishing %s to %s failed: %s", uri, self.publish_url, error)


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-seconds", type=float, default=600)
    parser.add_argument("--max-requests", type=int, default=100000)
    parser.add_argument("--publish", metavar="URL")
    parser.add_argument("--publish-token", metavar="TOKEN")
    args = parser.parse_args()
    if (args.publish is None) != (args.publish_token is None):
        parser.error("--publish and --publish-token go together")
    if args.max_seconds <= 0 or args.max_requests <= 0:
        parser.error("--max-seconds and --max-requests must be positive")
    return args


class Bounded:
    """ASGI wrapper: counts HTTP requests, refuses them once the server is
    ending, and can end whatever is still streaming so the process exits
    promptly and quietly."""

    def __init__(self, app: Any, max_requests: int, on_limit: Any) -> None:
        self.app = app
        self.max_requests = max_requests
        self.on_limit = on_limit
        self.requests = 0
        self.closing = False
        self.in_flight: set[anyio.CancelScope] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.requests += 1
        number = self.requests
        if self.closing or number > self.max_requests:
            await plain(send, 503, b"server is shutting down\n")
            return
        state = {"started": False, "done": False}

        async def tracking_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["done"] = True
            await send(message)

        with anyio.CancelScope() as cancel_scope:
            self.in_flight.add(cancel_scope)
            try:
                await self.app(scope, receive, tracking_send)
            finally:
                self.in_flight.discard(cancel_scope)
        if cancel_scope.cancel_called and not state["done"]:
            try:
                if state["started"]:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                else:
                    await plain(send, 503, b"server is shutting down\n")
            except Exception:  # the client is gone already
                pass
        if number == self.max_requests:
            self.on_limit(f"--max-requests {self.max_requests} reached")

    def end_all(self) -> None:
        for cancel_scope in list(self.in_flight):
            cancel_scope.cancel()


class Server(uvicorn.Server):
    """uvicorn's server, ending on SIGTERM/SIGINT the same quiet way as at a limit."""

    on_signal: Any = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.on_signal is None or self.should_exit:
            super().handle_exit(sig, frame)
        else:
            self.on_signal()


async def plain(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


async def main() -> None:
    args = arguments()
    upstream = Upstream(args.publish, args.publish_token)
    # host=127.0.0.1 also turns on the SDK's Host/Origin checks for loopback.
    app = upstream.server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    loop = asyncio.get_running_loop()

    def stop(reason: str) -> None:
        if bounded.closing:
            return
        bounded.closing = True
        log.warning("%s; exiting", reason)
        # Listen streams end gracefully (their final result frame, as the SDK
        # does it); whatever still streams a moment later (legacy GET streams)
        # is ended, so that uvicorn has nothing left to wait for.
        upstream.listen.close()
        loop.call_later(0.3, bounded.end_all)
        server.should_exit = True

    bounded = Bounded(app, args.max_requests, stop)
    config = uvicorn.Config(
        bounded,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        lifespan="on",
    )
    server = Server(config)
    server.on_signal = lambda: loop.call_soon_threadsafe(stop, "signalled")

    # Last resort: however shutdown goes, the process is gone shortly after
    # its time is up.
    watchdog = threading.Timer(args.max_seconds + 10, lambda: os._exit(3))
    watchdog.daemon = True
    watchdog.start()

    async def bounded_time() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        print(f"listening on http://127.0.0.1:{args.port}/mcp", flush=True)
        await asyncio.sleep(args.max_seconds)
        stop(f"--max-seconds {args.max_seconds:g} reached")

    timer = asyncio.create_task(bounded_time())
    try:
        await server.serve()
    finally:
        timer.cancel()
    if not server.started:
        sys.exit(1)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    logging.getLogger("upstream").setLevel(logging.INFO)
    asyncio.run(main())
