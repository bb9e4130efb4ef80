"""The mcp-edge reference deployment, driven by the official Python SDK (`mcp` 2.3.0).

Usage: python legacy_and_modern.py URL

Prints one line per check, `PASS name` or `FAIL name: reason`, and exits 0
when every check passed, 1 otherwise. Every check is reported exactly once:
a check whose prerequisite failed (no session, say) fails with that reason.

- Legacy era (2025-11-25: `initialize`, a session, `resources/subscribe`,
  updates on the session's GET stream), as alice, with bob alongside.
- Modern era (2026-07-28, stateless): `server/discover`, `subscriptions/listen`.
- An unknown bearer token: what the SDK user is shown.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, nullcontext
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated, Subscription, ToolsListChanged
from mcp.shared._httpx_utils import create_mcp_http_client

# resources/subscribe is deprecated by 2026-07-28; the legacy era is what is tested here.
warnings.simplefilter("ignore")

ALICE, BOB = "alice-token", "bob-token"
README = "demo://public/readme"
LOGO = "demo://public/static/logo"
ALICE_NOTES = "demo://users/alice/notes"
BOB_NOTES = "demo://users/bob/notes"
WATCHED = "test://watched-resource"
README_TEXT = "This server is the mcp-edge reference deployment."
UNAUTHORIZED_MESSAGE = "Unauthorized: unknown bearer token"

STEP = 15.0
"""Bound on one request, and on any wait for a notification that must come."""
QUIET = 1.5
"""How long to watch, after the control update, for a notification that must not come."""


class Failed(Exception):
    """A check's assertion did not hold; the message says what was seen."""


def expect(condition: bool, reason: str) -> None:
    if not condition:
        raise Failed(reason)


def mcp_error_in(exc: BaseException) -> MCPError | None:
    """The MCPError behind `exc`, looking inside exception groups and causes."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, MCPError):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return None


def describe(exc: BaseException) -> str:
    error = mcp_error_in(exc)
    if error is not None:
        return f"MCPError code={error.code} message={error.message!r}"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"


class Report:
    def __init__(self) -> None:
        self.failures = 0

    def line(self, name: str, reason: str | None) -> None:
        if reason is None:
            print(f"PASS {name}", flush=True)
        else:
            self.failures += 1
            print(f"FAIL {name}: {reason}", flush=True)

    async def check(self, name: str, body: Callable[[], Awaitable[Any]], *, bound: float | None = STEP) -> bool:
        """Run one check within `bound` seconds; any exception fails it, never the program.

        A check that enters a long-lived context (a client, a listen) passes
        `bound=None`: a cancel scope cannot close before a context opened in
        it does. Its requests are bounded by the client's read timeout.
        """
        try:
            with anyio.fail_after(bound) if bound is not None else nullcontext():
                await body()
        except Failed as failure:
            self.line(name, str(failure))
            return False
        except TimeoutError:
            self.line(name, f"timed out after {bound:g} s")
            return False
        except Exception as exc:  # noqa: BLE001 - a check reports whatever went wrong
            self.line(name, describe(exc))
            return False
        self.line(name, None)
        return True

    def skip(self, names: list[str], reason: str) -> None:
        for name in names:
            self.line(name, reason)


class Inbox:
    """The `notifications/resources/updated` one client received, in arrival order."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._changed = anyio.Event()

    def add(self, uri: str) -> None:
        self.uris.append(uri)
        self._changed.set()
        self._changed = anyio.Event()

    async def message_handler(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.add(message.params.uri)

    async def wait_for(self, uri: str, bound: float = STEP) -> int:
        """The index of the first update for `uri`, waiting up to `bound` seconds."""
        with anyio.fail_after(bound):
            while uri not in self.uris:
                await self._changed.wait()
        return self.uris.index(uri)


def http_client(token: str | None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    return create_mcp_http_client(headers=headers)


def client(url: str, token: str | None, mode: str, inbox: Inbox | None = None) -> Client:
    transport = streamable_http_client(url, http_client=http_client(token))
    return Client(
        transport,
        mode=mode,
        read_timeout_seconds=STEP,
        message_handler=inbox.message_handler if inbox is not None else None,
    )


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def expect_quiet(inbox: Inbox, uri: str, control: int) -> None:
    """No update for `uri` arrived before the control update (index `control`), nor in the QUIET after it."""
    early = [i for i, seen in enumerate(inbox.uris) if seen == uri and i < control]
    expect(not early, f"an update for {uri} arrived before the control update: {inbox.uris}")
    await anyio.sleep(QUIET)
    expect(uri not in inbox.uris, f"an update for {uri} arrived: {inbox.uris}")


async def legacy(url: str, report: Report) -> None:
    prefix = "python legacy:"
    names = {
        "initialize": f"{prefix} initialize (2025-11-25, resources.subscribe, tools)",
        "tools": f"{prefix} tools/list has echo, touch_resource, complete_task",
        "echo": f"{prefix} tools/call echo",
        "list": f"{prefix} resources/list shows alice the public resources and her notes, not bob's",
        "read": f"{prefix} resources/read {README}",
        "sub_ok": f"{prefix} resources/subscribe {ALICE_NOTES} succeeds",
        "sub_refused": f"{prefix} resources/subscribe {BOB_NOTES} refused with -32002, URI not named",
        "bob_update": f"{prefix} bob touches {BOB_NOTES}, bob's subscription hears it",
        "alice_update": f"{prefix} alice touches {ALICE_NOTES}, alice's subscription hears it",
        "no_leak": f"{prefix} alice hears nothing about {BOB_NOTES}",
    }
    async with AsyncExitStack() as stack:
        alice_inbox, bob_inbox = Inbox(), Inbox()
        alice = client(url, ALICE, "legacy", alice_inbox)

        connected: list[bool] = []

        async def initialize() -> None:
            await stack.enter_async_context(alice)
            connected.append(True)
            expect(alice.protocol_version == "2025-11-25", f"negotiated {alice.protocol_version!r}")
            caps = alice.server_capabilities
            expect(caps.resources is not None and caps.resources.subscribe is True,
                   f"resources capability is {caps.resources!r}")
            expect(caps.tools is not None, "no tools capability")

        # Checks after a failed one still run when there is a session to run them on.
        if not await report.check(names["initialize"], initialize, bound=None) and not connected:
            report.skip([n for k, n in names.items() if k != "initialize"], "no session: initialize failed")
            return

        async def tools() -> None:
            listed = {tool.name for tool in (await alice.list_tools()).tools}
            missing = {"echo", "touch_resource", "complete_task"} - listed
            expect(not missing, f"missing {sorted(missing)} in {sorted(listed)}")

        async def echo() -> None:
            result = await alice.call_tool("echo", {"text": "hello from python"})
            expect(not result.is_error, f"isError: {result.content}")
            expect(text_of(result) == "hello from python", f"answered {text_of(result)!r}")

        async def resources() -> None:
            uris = [str(resource.uri) for resource in (await alice.list_resources()).resources]
            expected = [README, LOGO, ALICE_NOTES, WATCHED]
            expect(sorted(uris) == sorted(expected), f"listed {uris}, expected {expected}")

        async def read() -> None:
            contents = (await alice.read_resource(README)).contents
            texts = [c.text for c in contents if isinstance(c, types.TextResourceContents)]
            expect(texts == [README_TEXT], f"read {texts}")

        async def subscribe_ok() -> None:
            await alice.subscribe_resource(ALICE_NOTES)

        async def subscribe_refused() -> None:
            try:
                await alice.subscribe_resource(BOB_NOTES)
            except MCPError as error:
                expect(error.code == -32002, f"code {error.code} (message {error.message!r}), expected -32002")
                said = f"{error.message} {json.dumps(error.data)}"
                expect(BOB_NOTES not in said and "bob" not in said,
                       f"the error names the resource: message {error.message!r}, data {error.data!r}")
                return
            raise Failed("the subscription was accepted")

        for key, body in [("tools", tools), ("echo", echo), ("list", resources), ("read", read),
                          ("sub_ok", subscribe_ok), ("sub_refused", subscribe_refused)]:
            await report.check(names[key], body)

        # Bob, in a session of his own, subscribes to and touches his notes
        # first; then alice touches hers. Her update is the control: once it
        # is in, nothing about bob's notes may have come before it, nor in
        # the QUIET that follows.
        bob = client(url, BOB, "legacy", bob_inbox)
        bob_touched: list[bool] = []

        async def bob_update() -> None:
            await stack.enter_async_context(bob)
            await bob.subscribe_resource(BOB_NOTES)
            result = await bob.call_tool("touch_resource", {"uri": BOB_NOTES})
            expect(not result.is_error, f"touch_resource isError: {text_of(result)!r}")
            bob_touched.append(True)
            await bob_inbox.wait_for(BOB_NOTES)

        await report.check(names["bob_update"], bob_update, bound=None)
        control: list[int] = []

        async def alice_update() -> None:
            result = await alice.call_tool("touch_resource", {"uri": ALICE_NOTES})
            expect(not result.is_error, f"touch_resource isError: {text_of(result)!r}")
            control.append(await alice_inbox.wait_for(ALICE_NOTES))

        if not await report.check(names["alice_update"], alice_update):
            report.skip([names["no_leak"]], "no control update to wait for")
        elif not bob_touched:
            report.skip([names["no_leak"]], "bob's notes were never touched")
        else:
            await report.check(names["no_leak"], lambda: expect_quiet(alice_inbox, BOB_NOTES, control[0]))


async def raw_discover(url: str, token: str) -> dict[str, Any]:
    """`server/discover` by hand, without the SDK: the capabilities as they are on the wire."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    async with httpx2.AsyncClient(timeout=STEP) as http:
        response = await http.post(url, json=body, headers=headers)
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = next(d for d in data if d)
    return json.loads(text)["result"]["capabilities"]


class Listening:
    """The events one listen delivered, gathered by a background task."""

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.inbox = Inbox()
        self.tools_changed = anyio.Event()

    async def gather(self) -> None:
        async for event in self.subscription:
            if isinstance(event, ResourceUpdated):
                self.inbox.add(event.uri)
            elif isinstance(event, ToolsListChanged):
                self.tools_changed.set()


async def modern(url: str, report: Report) -> None:
    prefix = "python modern:"
    names = {
        "discover": f"{prefix} server/discover: 2026-07-28, the capabilities the server advertises",
        "ack": f"{prefix} listen acknowledgment honours alice's notes only, and tools list changes",
        "update": f"{prefix} alice touches {ALICE_NOTES}, the listen delivers the update",
        "no_leak": f"{prefix} the listen delivers nothing about {BOB_NOTES}",
        "tools_changed": f"{prefix} a tool-list change is delivered on the listen",
        "malformed": f"{prefix} malformed listen filter refused with -32602",
    }
    async with AsyncExitStack() as stack:
        alice = client(url, ALICE, "auto")

        connected: list[bool] = []

        async def discover() -> None:
            await stack.enter_async_context(alice)
            connected.append(alice.protocol_version == "2026-07-28")
            expect(alice.protocol_version == "2026-07-28", f"negotiated {alice.protocol_version!r}")
            discovered = alice.session.discover_result
            expect(discovered is not None, "no server/discover result: the SDK fell back to initialize")
            seen = alice.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
            wire = await raw_discover(url, ALICE)
            expect(seen == wire, f"the SDK sees {seen}, the server sent {wire}")
            expect(seen.get("resources", {}).get("subscribe") is True, f"resources: {seen.get('resources')}")
            expect(seen.get("resources", {}).get("listChanged") is True, f"resources: {seen.get('resources')}")
            expect(seen.get("tools", {}).get("listChanged") is True, f"tools: {seen.get('tools')}")

        if not await report.check(names["discover"], discover, bound=None) and not any(connected):
            report.skip([n for k, n in names.items() if k not in ("discover", "malformed")],
                        "no 2026-07-28 connection: discover failed")
        else:
            await listen_checks(url, alice, stack, names, report)

        async def malformed() -> None:
            if not any(connected):
                raise Failed("no 2026-07-28 connection")
            # Client.listen() only builds well-formed filters, so this goes
            # through the session's generic request path, stamped like any other.
            request = types.Request[dict[str, Any], str](
                method="subscriptions/listen",
                params={"notifications": {"resourceSubscriptions": ALICE_NOTES}},
            )
            try:
                await alice.session.send_request(request, types.EmptyResult)
            except MCPError as error:
                expect(error.code == -32602, f"code {error.code} (message {error.message!r}), expected -32602")
                return
            raise Failed("the malformed filter was accepted")

        await report.check(names["malformed"], malformed)


async def listen_checks(url: str, alice: Client, stack: AsyncExitStack, names: dict[str, str],
                        report: Report) -> None:
    task_group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(task_group.cancel_scope.cancel)
    listening: list[Listening] = []

    async def ack() -> None:
        subscription = await stack.enter_async_context(
            alice.listen(tools_list_changed=True, resource_subscriptions=[ALICE_NOTES, BOB_NOTES]))
        listening.append(Listening(subscription))
        task_group.start_soon(listening[0].gather)
        honored = subscription.honored
        expect(honored.resource_subscriptions == [ALICE_NOTES],
               f"honoured resourceSubscriptions {honored.resource_subscriptions}")
        expect(honored.tools_list_changed is True, f"honoured toolsListChanged {honored.tools_list_changed}")

    if not await report.check(names["ack"], ack, bound=None) and not listening:
        report.skip([names["update"], names["no_leak"], names["tools_changed"]], "no listen stream")
        return
    stream = listening[0]
    bob = client(url, BOB, "auto")
    control: list[int] = []

    async def update() -> None:
        # Bob's touch goes first, as in the legacy scenario.
        await stack.enter_async_context(bob)
        touched = await bob.call_tool("touch_resource", {"uri": BOB_NOTES})
        expect(not touched.is_error, f"bob's touch_resource isError: {text_of(touched)!r}")
        touched = await alice.call_tool("touch_resource", {"uri": ALICE_NOTES})
        expect(not touched.is_error, f"alice's touch_resource isError: {text_of(touched)!r}")
        control.append(await stream.inbox.wait_for(ALICE_NOTES))

    if await report.check(names["update"], update, bound=None):
        await report.check(names["no_leak"], lambda: expect_quiet(stream.inbox, BOB_NOTES, control[0]))
    else:
        report.skip([names["no_leak"]], "no control update to wait for")

    async def tools_changed() -> None:
        await alice.call_tool("test_trigger_tool_change", {})
        await stream.tools_changed.wait()

    await report.check(names["tools_changed"], tools_changed)


async def invalid_token(url: str, report: Report) -> None:
    # Connecting raises an ExceptionGroup (the client's task groups) around
    # the MCPError the transport made of the 401's JSON-RPC body; the
    # traceback, and `except* MCPError`, show the server's message.
    for mode, what in [("legacy", "initialize"), ("auto", "server/discover, then initialize")]:
        name = f"python invalid token ({mode}: {what}) shows the server's 401 message"

        async def connect(mode: str = mode) -> None:
            try:
                async with client(url, "wrong", mode):
                    pass
            except Exception as exc:  # noqa: BLE001 - whatever the SDK raises is what its user sees
                error = mcp_error_in(exc)
                shown = str(error) if error is not None else str(exc)
                expect(UNAUTHORIZED_MESSAGE in shown, f"the SDK shows {describe(exc)}")
                expect(error is None or error.code != -32603, f"a generic internal error: {describe(exc)}")
                return
            raise Failed("connected with an unknown token")

        await report.check(name, connect)


async def main(url: str) -> int:
    report = Report()
    started = time.monotonic()
    for scenario in (legacy, modern, invalid_token):
        try:
            await scenario(url, report)
        except Exception as exc:  # noqa: BLE001 - e.g. a failing teardown: report it, go on
            report.line(f"python {scenario.__name__}: scenario teardown", describe(exc))
    print(f"# python: {report.failures} failed, {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 1 if report.failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: legacy_and_modern.py URL")
    sys.exit(anyio.run(main, sys.argv[1]))
