"""One fixed sequence on the official Python SDK (PyPI `mcp` 2.3.0), as alice.

Usage: python python_sdk.py URL modern|legacy

  modern  the 2026-07-28 era (`mode="auto"`: server/discover, stateless
          requests, `subscriptions/listen`)
  legacy  the 2025-11-25 era (`mode="legacy"`: initialize, a session,
          `resources/subscribe`, updates on the session's GET stream)

Connects with `Authorization: Bearer alice-token`, then: lists tools, calls
`echo`, lists resources, reads demo://users/alice/notes, subscribes to (or
listens for) alice's notes, calls `touch_resource` on them, and waits for the
update. Prints its transcript on stdout, one line per step,
`STEP <step> | <what it saw>`, normalized (no session ids, no timings, the
resources' version counters as N), so that two runs against servers that
behave alike print the same lines. A step that raised prints
`STEP <step> | error <what>`; a step whose prerequisite failed prints
`STEP <step> | skipped: <why>`. Lines starting `INFO` are context, not
transcript. Exits 0 (whatever the steps saw) unless the program itself broke.
"""

from __future__ import annotations

import re
import sys
import warnings
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.subscriptions import ResourceUpdated

# resources/subscribe is deprecated by 2026-07-28; the legacy era uses it on purpose.
warnings.simplefilter("ignore")

TOKEN = "alice-token"
ALICE_NOTES = "demo://users/alice/notes"
STEP = 10.0
"""Bound on each step, and on the wait for the update."""

STEPS = ["connect", "tools/list", "tools/call echo", "resources/list", f"resources/read {ALICE_NOTES}",
         "subscribe", f"tools/call touch_resource {ALICE_NOTES}", "update heard"]


def normalize(text: str) -> str:
    return re.sub(r"version \d+", "version N", text)


def mcp_error_in(exc: BaseException) -> MCPError | None:
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
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
    if isinstance(exc, TimeoutError):
        return f"timed out after {STEP:g} s"
    return f"{type(exc).__name__}: {exc}"


class Transcript:
    def __init__(self) -> None:
        self.done: dict[str, str] = {}

    def step(self, name: str, seen: str) -> None:
        self.done[name] = seen
        print(f"STEP {name} | {normalize(seen)}", flush=True)

    def ok(self, name: str) -> bool:
        return name in self.done and not self.done[name].startswith(("error", "skipped"))

    def rest(self, why: str) -> None:
        for name in STEPS:
            if name not in self.done:
                self.step(name, f"skipped: {why}")


def text_of(content: list[Any]) -> str:
    return "".join(block.text for block in content if isinstance(block, types.TextContent))


async def run(url: str, era: str) -> None:
    transcript = Transcript()
    heard: list[str] = []
    changed = anyio.Event()

    def hear(uri: str) -> None:
        nonlocal changed
        heard.append(uri)
        changed.set()
        changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            hear(str(message.params.uri))

    async def attempt(name: str, body: Any, bound: float | None = STEP) -> None:
        try:
            if bound is None:
                seen = await body()
            else:
                with anyio.fail_after(bound):
                    seen = await body()
        except Exception as exc:  # noqa: BLE001 - a step records whatever went wrong
            transcript.step(name, f"error {describe(exc)}")
            return
        transcript.step(name, seen)

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    client = Client(
        streamable_http_client(url, http_client=http),
        mode="auto" if era == "modern" else "legacy",
        read_timeout_seconds=STEP,
        message_handler=on_message,
    )
    async with AsyncExitStack() as stack:

        async def connect() -> str:
            await stack.enter_async_context(client)
            info = client.server_info
            caps = client.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
            print(f"INFO server capabilities {caps}", flush=True)
            return f"protocol {client.protocol_version}, server {info.name if info else None}"

        # Entering the client opens a context: not within a cancel scope of its own.
        await attempt("connect", connect, bound=None)
        if not transcript.ok("connect"):
            transcript.rest("not connected")
            return

        async def tools() -> str:
            return "tools " + ", ".join(sorted(tool.name for tool in (await client.list_tools()).tools))

        async def echo() -> str:
            result = await client.call_tool("echo", {"text": "hello through the edge"})
            return f"isError={bool(result.is_error)} text={text_of(result.content)!r}"

        async def resources() -> str:
            listed = (await client.list_resources()).resources
            return "resources " + ", ".join(sorted(str(resource.uri) for resource in listed))

        async def read() -> str:
            contents = (await client.read_resource(ALICE_NOTES)).contents
            return "contents " + " | ".join(
                f"{c.uri} {c.mime_type} {c.text!r}" for c in contents if isinstance(c, types.TextResourceContents))

        for name, body in zip(STEPS[1:5], (tools, echo, resources, read)):
            await attempt(name, body)

        task_group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(task_group.cancel_scope.cancel)

        async def subscribe() -> str:
            if era == "legacy":
                await client.subscribe_resource(ALICE_NOTES)
                return "resources/subscribe ok"
            subscription = await stack.enter_async_context(client.listen(resource_subscriptions=[ALICE_NOTES]))

            async def gather() -> None:
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        hear(event.uri)

            task_group.start_soon(gather)
            return f"subscriptions/listen honoured {subscription.honored.resource_subscriptions}"

        await attempt("subscribe", subscribe, bound=None)

        async def touch() -> str:
            result = await client.call_tool("touch_resource", {"uri": ALICE_NOTES})
            return f"isError={bool(result.is_error)} text={text_of(result.content)!r}"

        await attempt(STEPS[6], touch)
        if not transcript.ok("subscribe") or not transcript.ok(STEPS[6]):
            transcript.rest("no subscription or no touch")
            return

        async def update() -> str:
            try:
                with anyio.fail_after(STEP):
                    while ALICE_NOTES not in heard:
                        await changed.wait()
            except TimeoutError:
                return f"nothing for {ALICE_NOTES} within {STEP:g} s (heard {heard})"
            return f"notifications/resources/updated {heard[: heard.index(ALICE_NOTES) + 1]}"

        await attempt("update heard", update, bound=None)


async def main(url: str, era: str) -> int:
    try:
        await run(url, era)
    except Exception as exc:  # noqa: BLE001 - teardown: the transcript is already out
        print(f"INFO teardown: {describe(exc)}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("modern", "legacy"):
        sys.exit("usage: python_sdk.py URL modern|legacy")
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2]))
