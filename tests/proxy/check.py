"""The checks of tests/proxy/run.sh: mcp-edge-proxy in front of the two
upstream MCP servers of tests/proxy/upstreams/ (official Python and
TypeScript SDKs), against what the same servers do direct.

Usage: python check.py --out DIR --proxy BIN --upstreams-python PY
                       --upstreams-node NODE --upstreams-node-dir DIR
                       --clients-python PY --clients-node NODE --clients-dir DIR
                       --suite-node NODE --suite-dir DIR --redis-server BIN
                       [--only sdk,conformance,containment,hub,redis]

Run by run.sh, which installs all of these (its header says what is
checked). Standard library only. Every server it starts listens on
127.0.0.1 on a free port, in a process group of its own whose id goes to
DIR/pids (so that run.sh can end it even if this program is killed), and is
stopped before it exits. Prints one `PASS …`/`FAIL …` line per check (with
details indented below), then `N passed, M failed`. Exit status: 0 when
nothing failed, 1 when a check failed, 2 on a setup error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
UPSTREAMS = HERE / "upstreams"
CLIENTS = HERE / "clients"

ALICE, BOB = "alice-token", "bob-token"
ALICE_NOTES = "demo://users/alice/notes"
BOB_NOTES = "demo://users/bob/notes"
README = "demo://public/readme"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
PUBLISH_TOKEN = "publish-token-of-the-proxy-tests"
# The upstreams' own bound: longer than this whole program may take.
UPSTREAM_SECONDS = 900
# Bounds, seconds.
READY = 30  # a server prints its ready line
REQUEST = 15  # one HTTP request
HEAR = 5  # a notification that must come
QUIET = 1.0  # after the last touch, for one that must not
CLIENT_TIMEOUT = 90  # one SDK client program
SCENARIO_TIMEOUT = 120  # one conformance scenario

# The suite's scenarios, as tests/conformance/run.sh runs them.
SCENARIOS = [
    "server-stateless@2026-07-28",
    "dns-rebinding-protection@2026-07-28",
    "server-initialize@2025-11-25",
    "server-session-lifecycle@2025-11-25",
    "ping@2025-11-25",
    "tools-list@2025-11-25",
    "resources-subscribe@2025-11-25",
    "resources-unsubscribe@2025-11-25",
    "dns-rebinding-protection@2025-11-25",
]


class SetupError(Exception):
    """Something this program needs could not be started: exit 2."""


# --- the report --------------------------------------------------------------

class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def line(self, ok: bool, name: str, details: list[str] | None = None) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {name}", flush=True)
        for detail in details or []:
            print(f"       {detail}", flush=True)
        return ok


def section(title: str) -> None:
    print(f"== {title}", flush=True)


def short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "…"


# --- processes ---------------------------------------------------------------

class Process:
    def __init__(self, name: str, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.popen = popen
        self.log = log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


class Processes:
    """Every process this program starts, each in a process group of its own."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.pids = out / "pids"
        self.running: list[Process] = []
        self.lock = threading.Lock()

    def start(self, name: str, argv: list[str], *, ready: str | None = None,
              env: dict[str, str] | None = None, cwd: Path | None = None) -> Process:
        """Starts `argv` with its output in OUT/NAME.log; with `ready`, waits
        until the output holds that regex (a SetupError if it does not)."""
        log = self.out / f"{name}.log"
        number = 1
        while log.exists():
            number += 1
            log = self.out / f"{name}-{number}.log"
        # Straight to loopback, whatever proxy the environment names.
        env = dict(os.environ if env is None else env)
        for key in ("NO_PROXY", "no_proxy"):
            env[key] = ",".join(filter(None, [env.get(key), "127.0.0.1", "localhost"]))
        with open(log, "wb") as sink:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env, cwd=cwd)
        process = Process(name, popen, log)
        with self.lock:
            self.running.append(process)
            self.record()
        if ready is not None:
            deadline = time.monotonic() + READY
            while not re.search(ready, process.output()):
                if not process.alive():
                    raise SetupError(f"{name} exited ({popen.returncode}): {short(process.output(), 2000)}")
                if time.monotonic() > deadline:
                    self.stop(process)
                    raise SetupError(f"{name} did not print {ready!r} within {READY} s: {short(process.output())}")
                time.sleep(0.05)
        return process

    def stop(self, process: Process, sig: int = signal.SIGTERM, grace: float = 10) -> None:
        """Ends `process` and its group: `sig`, then KILL after `grace` seconds."""
        for s in (sig, signal.SIGKILL):
            try:
                os.killpg(process.pid, s)
            except ProcessLookupError:
                pass
            try:
                process.popen.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        # Whatever else its group left (none expected).
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        with self.lock:
            if process in self.running:
                self.running.remove(process)
            self.record()

    def record(self) -> None:
        """OUT/pids: the process groups still running (for run.sh, should this program die)."""
        temporary = self.pids.with_suffix(".new")
        temporary.write_text("".join(f"{process.pid}\n" for process in self.running))
        temporary.replace(self.pids)

    def run(self, name: str, argv: list[str], timeout: float, cwd: Path | None = None) -> tuple[int | None, str]:
        """Runs `argv` to its end (None: timed out, then killed); its status and output."""
        process = self.start(name, argv, cwd=cwd)
        try:
            status: int | None = process.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
        self.stop(process, grace=2)
        return status, process.output()

    def stop_all(self) -> None:
        with self.lock:
            running = list(self.running)
        for process in reversed(running):
            self.stop(process, grace=5)


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (each held until all are found)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# --- HTTP --------------------------------------------------------------------

def parse_sse(text: str) -> list[dict[str, Any]]:
    """The JSON messages of an event-stream body."""
    messages, data = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line == "" and data:
            try:
                messages.append(json.loads("\n".join(data)))
            except ValueError:
                messages.append({"unparsed": "\n".join(data)})
            data = []
    return messages


class Answer:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: str) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        kind = headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            self.messages = parse_sse(body)
        else:
            try:
                self.messages = [json.loads(body)] if body.strip() else []
            except ValueError:
                self.messages = []

    def message(self, id_: Any = None) -> dict[str, Any] | None:
        """The response (the message with `id_`, or the last with a result or error)."""
        for message in self.messages:
            if ("result" in message or "error" in message) and (id_ is None or message.get("id") == id_):
                return message
        return None

    def __str__(self) -> str:
        return f"HTTP {self.status} {short(self.body.strip(), 600)}"


def http_request(url: str, method: str, body: bytes | None, headers: dict[str, str],
                 timeout: float = REQUEST) -> Answer:
    host, port, path = split(url)
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read().decode(errors="replace")
        return Answer(response.status, response.headers, data)
    finally:
        connection.close()


def split(url: str) -> tuple[str, int, str]:
    match = re.fullmatch(r"http://([^:/]+):(\d+)(/.*)", url)
    assert match, url
    return match[1], int(match[2]), match[3]


_ids = iter(range(1000, 10**9))


def modern_headers(token: str | None, method: str, name: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def modern_body(method: str, params: dict[str, Any], id_: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": {**params, "_meta": META}}).encode()


def touch(url: str, uri: str, token: str = ALICE) -> Answer:
    """`tools/call touch_resource {uri}` in the 2026-07-28 era."""
    id_ = next(_ids)
    body = modern_body("tools/call", {"name": "touch_resource", "arguments": {"uri": uri}}, id_)
    return http_request(url, "POST", body, modern_headers(token, "tools/call", "touch_resource"))


def touched(answer: Answer) -> bool:
    message = answer.message()
    return answer.status == 200 and message is not None and "result" in message \
        and not message["result"].get("isError")


class Stream:
    """An open event stream (a listen's POST, or a legacy GET), read by a
    thread: every message, and whether (and when) the stream ended."""

    def __init__(self, url: str, method: str, body: bytes | None, headers: dict[str, str]) -> None:
        host, port, path = split(url)
        self.connection = http.client.HTTPConnection(host, port, timeout=REQUEST)
        self.connection.request(method, path, body=body, headers=headers)
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.kind = self.response.headers.get("content-type", "")
        self.messages: list[dict[str, Any]] = []
        self.ended_at: float | None = None
        self.error: str | None = None
        self.changed = threading.Condition()
        if self.connection.sock is not None:
            self.connection.sock.settimeout(None)
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        data: list[str] = []
        try:
            if not self.kind.startswith("text/event-stream"):
                body = self.response.read().decode(errors="replace")
                self.add(json.loads(body) if body.strip() else {"empty": True})
                return
            while True:
                raw = self.response.readline()
                if not raw:
                    break
                line = raw.decode(errors="replace").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    try:
                        self.add(json.loads("\n".join(data)))
                    except ValueError:
                        self.add({"unparsed": "\n".join(data)})
                    data = []
        except Exception as error:  # noqa: BLE001 - the connection closed under us
            self.error = f"{type(error).__name__}: {error}"
        finally:
            with self.changed:
                self.ended_at = time.monotonic()
                self.changed.notify_all()

    def add(self, message: dict[str, Any]) -> None:
        with self.changed:
            self.messages.append(message)
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                left = deadline - time.monotonic()
                if left <= 0 or self.ended_at is not None:
                    return None
                self.changed.wait(left)

    def updates(self) -> list[str]:
        with self.changed:
            return [m.get("params", {}).get("uri") for m in self.messages
                    if m.get("method") == "notifications/resources/updated"]

    def ended(self) -> bool:
        return self.ended_at is not None

    def close(self) -> None:
        try:
            if self.connection.sock is not None:
                self.connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()
        self.thread.join(timeout=5)


def listen(url: str, token: str | None, uris: list[str]) -> Stream:
    id_ = next(_ids)
    body = modern_body("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}}, id_)
    return Stream(url, "POST", body, modern_headers(token, "subscriptions/listen"))


def is_ack(message: dict[str, Any]) -> bool:
    return message.get("method") == "notifications/subscriptions/acknowledged"


def is_update(uri: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == "notifications/resources/updated" and m.get("params", {}).get("uri") == uri


def acked_uris(ack: dict[str, Any] | None) -> list[str] | None:
    if ack is None:
        return None
    return ack.get("params", {}).get("notifications", {}).get("resourceSubscriptions", [])


class LegacySession:
    """A 2025-11-25 session by hand: initialize, notifications/initialized, requests."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.session: str | None = None
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {},
                           "clientInfo": {"name": "mcp-edge-proxy-tests", "version": "1.0.0"}}}
        answer = http_request(url, "POST", json.dumps(init).encode(), self.headers())
        self.session = answer.headers.get("mcp-session-id")
        message = answer.message(1)
        if self.session is None or message is None or "result" not in message:
            raise RuntimeError(f"initialize: {answer}")
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        answer = http_request(url, "POST", json.dumps(note).encode(), self.headers())
        if answer.status not in (200, 202):
            raise RuntimeError(f"notifications/initialized: {answer}")

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = LEGACY
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def request(self, method: str, params: dict[str, Any]) -> tuple[Answer, dict[str, Any] | None]:
        id_ = next(_ids)
        body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()
        answer = http_request(self.url, "POST", body, self.headers())
        return answer, answer.message(id_)

    def close(self) -> None:
        try:
            http_request(self.url, "DELETE", None, self.headers(), timeout=5)
        except OSError:
            pass


# --- the deployment ----------------------------------------------------------

class Tools:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.processes = Processes(self.out)

    def upstream(self, kind: str, port: int, publish: int | None = None, name: str | None = None) -> Process:
        args = ["--port", str(port), "--max-seconds", str(UPSTREAM_SECONDS)]
        if publish is not None:
            args += ["--publish", f"http://127.0.0.1:{publish}/publish", "--publish-token", PUBLISH_TOKEN]
        if kind == "python":
            argv = [self.args.upstreams_python, str(UPSTREAMS / "python" / "server.py"), *args]
        else:
            argv = [self.args.upstreams_node, str(UPSTREAMS / "typescript" / "server.mjs"), *args,
                    "--sdk-dir", self.args.upstreams_node_dir]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        return self.processes.start(name or f"upstream-{kind}-{port}", argv,
                                    ready=rf"listening on http://127\.0\.0\.1:{port}/mcp", env=env)

    def proxy(self, name: str, listen_port: int, upstream_port: int, *, publish: int | None = None,
              redis: str | None = None, conformance: bool = False) -> Process:
        config = self.out / f"{name}.toml"
        config.write_text(proxy_config(listen_port, upstream_port, publish, redis, conformance))
        argv = [self.args.proxy, "--config", str(config)]
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        ready = rf"listening on http://127\.0\.0\.1:{listen_port}/mcp"
        if publish is not None:
            ready = rf"publish at http://127\.0\.0\.1:{publish}/publish"
        return self.processes.start(name, argv, ready=ready, env=env)


def proxy_config(listen_port: int, upstream_port: int, publish: int | None, redis: str | None,
                 conformance: bool) -> str:
    text = f"""\
listen = "127.0.0.1:{listen_port}"
upstream = "http://127.0.0.1:{upstream_port}/mcp"
[capabilities]
tools = {{}}
resources = {{}}
[[caller]]
token = "{ALICE}"
principal = "alice"
[[caller]]
token = "{BOB}"
principal = "bob"
[[allow]]
principals = ["alice"]
uri_prefixes = ["demo://users/alice/"]
[[allow]]
principals = ["bob"]
uri_prefixes = ["demo://users/bob/"]
[[allow]]
principals = ["*"]
uri_prefixes = ["demo://public/"]
"""
    if conformance:
        text += """\
# The conformance suite connects anonymously and subscribes to
# test://watched-resource (resources-subscribe, resources-unsubscribe).
[[allow]]
principals = ["*"]
uri_prefixes = ["test://"]
"""
    if publish is not None:
        text += f"""\
[hub]
publish = "127.0.0.1:{publish}"
publish_token = "{PUBLISH_TOKEN}"
"""
        if redis is not None:
            text += f'redis = "{redis}"\n'
    return text


# --- 1. the official SDK clients ------------------------------------------

def sdk_transcript(tools: Tools, program: str, url: str, label: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Runs one client program; its STEP lines as (step, seen), and its other output."""
    args = tools.args
    if program.startswith("python"):
        era = program.split()[1]
        argv = [args.clients_python, str(CLIENTS / "python_sdk.py"), url, era]
    else:
        argv = [args.clients_node, str(CLIENTS / "typescript_sdk.mjs"), url, args.clients_dir]
    status, output = tools.processes.run(f"client-{program.replace(' ', '-')}-{label}", argv, CLIENT_TIMEOUT)
    steps, other = [], []
    for line in output.splitlines():
        match = re.fullmatch(r"STEP (.*?) \| (.*)", line)
        if match:
            steps.append((match[1], match[2]))
        elif line.strip():
            other.append(line)
    if status != 0:
        other.append(f"the program {'timed out' if status is None else f'exited {status}'}")
    return steps, other


def unsupported(seen: str) -> bool:
    return seen.startswith(("error", "skipped"))


def check_sdk(tools: Tools, report: Report, kind: str, direct: str, proxied: str) -> None:
    for program, era in [("python modern", "2026-07-28"), ("python legacy", "2025-11-25"),
                         ("typescript legacy", "2025-11-25")]:
        sdk = "Python SDK mcp 2.3.0" if program.startswith("python") else "TypeScript SDK 1.32.2"
        name = f"[{kind} upstream] {sdk}, {era} era, as alice: the transcript through the proxy is the direct one"
        direct_steps, direct_other = sdk_transcript(tools, program, direct, f"{kind}-direct")
        proxy_steps, proxy_other = sdk_transcript(tools, program, proxied, f"{kind}-proxy")
        # A step the SDK cannot do direct is "unsupported" on both sides.
        cannot = {step for step, seen in direct_steps if unsupported(seen)}
        left = [(s, "unsupported" if s in cannot else seen) for s, seen in direct_steps]
        right = [(s, "unsupported" if s in cannot else seen) for s, seen in proxy_steps]
        details = []
        heard = any(s == "update heard" and seen.startswith("notifications/resources/updated")
                    for s, seen in left)
        for step, seen in direct_steps:
            if step in cannot:
                details.append(f"unsupported direct: {step}: {seen}")
        if not left:
            details.append(f"no transcript direct: {short(' / '.join(direct_other), 1000)}")
        elif left != right:
            proxy_map = dict(right)
            for step, seen in left:
                if proxy_map.get(step) != seen:
                    details.append(f"{step}: direct   {seen}")
                    details.append(f"{' ' * len(step)}  proxy    {proxy_map.get(step, '(missing)')}")
            for step, seen in right:
                if step not in dict(left):
                    details.append(f"{step}: only through the proxy: {seen}")
            details.extend(f"proxy: {line}" for line in proxy_other if not line.startswith("INFO server"))
        elif not heard:
            details.append("the update was not heard direct: the transcript proves nothing")
        else:
            details.append(f"{len(left)} steps equal; {dict(left)['update heard']}")
        # Context, not compared: the capabilities the SDK was shown.
        shown = [[line for line in other if line.startswith("INFO server capabilities")]
                 for other in (direct_other, proxy_other)]
        if shown[0] != shown[1]:
            details.append(f"(not compared) direct: {' '.join(shown[0])[5:]}")
            details.append(f"(not compared) proxy:  {' '.join(shown[1])[5:]}")
        report.line(bool(left) and left == right and heard, name, details)


# --- 2. conformance --------------------------------------------------------

def scenario_result(tools: Tools, url: str, entry: str, label: str) -> tuple[bool, str, dict[str, str]]:
    """Runs one scenario: whether it passed, a summary, and each check's status."""
    scenario, spec = entry.split("@")
    out = tools.out / "conformance" / label / entry
    out.mkdir(parents=True, exist_ok=True)
    suite = Path(tools.args.suite_dir)
    argv = [tools.args.suite_node, str(suite / "node_modules/@modelcontextprotocol/conformance/dist/index.js"),
            "server", "--url", url, "--scenario", scenario, "--spec-version", spec, "-o", str(out)]
    status, output = tools.processes.run(f"conformance-{label}-{entry}", argv, SCENARIO_TIMEOUT, cwd=suite)
    checks: dict[str, str] = {}
    counts = {"SUCCESS": 0, "FAILURE": 0, "WARNING": 0, "SKIPPED": 0}
    files = sorted(out.rglob("checks.json"))
    for file in files:
        for check in json.loads(file.read_text()):
            counts[check["status"]] = counts.get(check["status"], 0) + 1
            key = check["id"]
            while key in checks:
                key += "'"
            checks[key] = check["status"] + (f": {str(check.get('errorMessage') or '').splitlines()[0][:200]}"
                                              if check["status"] == "FAILURE" and check.get("errorMessage") else "")
    if not files:
        why = "timed out" if status is None else f"exited {status}"
        return False, f"no checks.json ({why})", checks
    passed = counts["FAILURE"] == 0
    summary = (f"{'passed' if passed else 'failed'} ({counts['SUCCESS']} ok, {counts['FAILURE']} failed, "
               f"{counts['WARNING']} warnings, {counts['SKIPPED']} skipped)")
    return passed, summary, checks


def check_conformance(tools: Tools, report: Report, kind: str, direct: str, proxied: str) -> None:
    for entry in SCENARIOS:
        direct_ok, direct_summary, direct_checks = scenario_result(tools, direct, entry, f"{kind}-direct")
        proxy_ok, proxy_summary, proxy_checks = scenario_result(tools, proxied, entry, f"{kind}-proxy")
        details = [f"direct: {direct_summary}", f"proxy:  {proxy_summary}"]
        for check, status in proxy_checks.items():
            if status.startswith("FAILURE") and not direct_checks.get(check, "").startswith("FAILURE"):
                details.append(f"through the proxy only: {check} {status}")
        name = f"[{kind} upstream] conformance {entry}: no worse through the proxy than direct"
        report.line(proxy_ok or not direct_ok, name, details)


# --- 3. containment ---------------------------------------------------------

def bob_listens(url: str, touch_url: str) -> tuple[Stream | None, list[str], list[str] | None, list[str]]:
    """Bob listens for both notes; alice touches hers, then his. Bob's
    stream, what went wrong setting up, the acknowledged URIs, and the URIs
    of the updates bob heard (up to QUIET after he heard his own)."""
    problems = []
    try:
        stream = listen(url, BOB, [ALICE_NOTES, BOB_NOTES])
    except OSError as error:
        return None, [f"the listen could not be sent: {error}"], None, []
    if stream.status != 200:
        stream.wait_for(lambda m: True, HEAR)
        problems.append(f"the listen was answered HTTP {stream.status}: {short(stream.messages)}")
        stream.close()
        return None, problems, None, []
    ack = stream.wait_for(is_ack, HEAR)
    if ack is None:
        problems.append(f"no acknowledgment within {HEAR} s (stream: {short(stream.messages)}, "
                        f"ended={stream.ended()})")
    for uri in (ALICE_NOTES, BOB_NOTES):
        answer = touch(touch_url, uri)
        if not touched(answer):
            problems.append(f"touch_resource {uri} as alice: {answer}")
    stream.wait_for(is_update(BOB_NOTES), HEAR)
    time.sleep(QUIET)
    return stream, problems, acked_uris(ack), stream.updates()


def publications(upstream: Process) -> list[str]:
    """The POSTs to the publish endpoint the upstream logged: `URI: HTTP status`."""
    return [f"{m[1]}: HTTP {m[2]}" for m in re.finditer(r"published (\S+): HTTP (\d+)", upstream.output())]


def check_containment(tools: Tools, report: Report, kind: str, direct: str, proxied: str, hub: str,
                      hub_upstream: Process) -> None:
    # Direct: the leak this upstream has by design.
    stream, problems, acked, heard = bob_listens(direct, direct)
    name = (f"[{kind} upstream] direct, 2026-07-28: bob's listen for both notes is acknowledged for both, "
            "and hears alice's update (the leak)")
    leak = stream.wait_for(is_update(ALICE_NOTES), 0) if stream else None
    details = problems + [f"acknowledged: {acked}", f"bob heard updates for: {heard}"]
    if leak is not None:
        details.append(f"the leak, on bob's stream: {short(leak)}")
    report.line(not problems and sorted(acked or []) == sorted([ALICE_NOTES, BOB_NOTES]) and leak is not None,
                name, details)
    if stream:
        stream.close()

    for mode, url in [("proxy", proxied), ("hub proxy", hub)]:
        stream, problems, acked, heard = bob_listens(url, url)
        name = (f"[{kind} upstream] {mode}, 2026-07-28: bob's listen is acknowledged for his notes only; "
                "he hears his update, never alice's")
        details = problems + [f"acknowledged: {acked}", f"bob heard updates for: {heard}"]
        if stream:
            details.append(f"bob's stream: {short(stream.messages, 1200)}")
        ok = not problems and acked == [BOB_NOTES] and BOB_NOTES in heard and ALICE_NOTES not in heard
        if mode == "hub proxy":
            # The upstream told its changes by one POST each, and the hub took them.
            posted = publications(hub_upstream)
            details.append(f"the upstream's POSTs to the publish endpoint: {posted}")
            ok = ok and posted == [f"{ALICE_NOTES}: HTTP 202", f"{BOB_NOTES}: HTTP 202"]
        if stream and ALICE_NOTES in heard:
            details.append(f"LEAK: {short(stream.wait_for(is_update(ALICE_NOTES), 0))}")
        report.line(ok, name, details)
        if stream:
            stream.close()

    # Legacy: resources/subscribe by bob of alice's notes.
    outcomes: dict[str, Any] = {}
    for side, url in [("direct", direct), ("proxy", proxied)]:
        try:
            session = LegacySession(url, BOB)
        except (OSError, RuntimeError) as error:
            outcomes[side] = f"no session: {error}"
            continue
        try:
            answer, message = session.request("resources/subscribe", {"uri": ALICE_NOTES})
            outcomes[side] = message if message is not None else str(answer)
        except OSError as error:
            outcomes[side] = f"{type(error).__name__}: {error}"
        finally:
            session.close()
    direct_ok = isinstance(outcomes["direct"], dict) and "result" in outcomes["direct"]
    proxy_said = outcomes["proxy"]
    proxy_ok = isinstance(proxy_said, dict) and proxy_said.get("error", {}).get("code") == -32002
    name = (f"[{kind} upstream] legacy 2025-11-25: bob's resources/subscribe of alice's notes is accepted direct "
            "and refused with -32002 through the proxy")
    report.line(direct_ok and proxy_ok, name,
                [f"direct: {short(outcomes['direct'])}", f"proxy:  {short(proxy_said)}"])


# --- 4. the publish endpoint -------------------------------------------------

def check_publish_endpoint(report: Report, publish_url: str) -> None:
    valid = json.dumps({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                        "params": {"uri": README}}).encode()
    token = {"Content-Type": "application/json", "Authorization": f"Bearer {PUBLISH_TOKEN}"}
    big = json.dumps({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                      "params": {"uri": README, "padding": "x" * (64 * 1024)}}).encode()
    cases = [
        ("without the token", valid, {"Content-Type": "application/json"}, 401),
        ("with a wrong token", valid, {"Content-Type": "application/json",
                                       "Authorization": "Bearer wrong-token-wrong-token"}, 401),
        ("with a malformed body (not JSON)", b"{not json", token, 400),
        ("with a request, not a notification", b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}', token, 400),
        (f"over 64 KiB ({len(big)} bytes)", big, token, 413),
        ("with a valid notifications/resources/updated", valid, token, 202),
    ]
    for what, body, headers, expected in cases:
        try:
            answer = http_request(publish_url, "POST", body, headers)
            said = str(answer)
            ok = answer.status == expected
        except OSError as error:
            said, ok = f"{type(error).__name__}: {error}", False
        report.line(ok, f"[hub] POST /publish {what}: {expected}", [f"answer: {said}"])


# --- 5. two proxies on one Redis ---------------------------------------------

def check_redis(tools: Tools, report: Report) -> None:
    name = "[hub + redis] two hub proxies on one Redis: alice's listen on proxy B hears a touch made through proxy A"
    redis_port, upstream_port, a_port, a_publish, b_port, b_publish = free_ports(6)
    try:
        redis = tools.processes.start("redis-server", [
            tools.args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"],
            ready=r"Ready to accept connections")
        url = f"redis://127.0.0.1:{redis_port}/"
        upstream = tools.upstream("python", upstream_port, publish=a_publish, name="upstream-redis")
        proxy_a = tools.proxy("proxy-redis-a", a_port, upstream_port, publish=a_publish, redis=url)
        # B needs an upstream too (nothing here reaches it: B's hub answers
        # the listen): the same one.
        proxy_b = tools.proxy("proxy-redis-b", b_port, upstream_port, publish=b_publish, redis=url)
    except SetupError as error:
        report.line(False, name, [f"setup: {error}"])
        return
    a, b = f"http://127.0.0.1:{a_port}/mcp", f"http://127.0.0.1:{b_port}/mcp"
    details = []
    stream = listen(b, ALICE, [ALICE_NOTES])
    ack = stream.wait_for(is_ack, HEAR)
    details.append(f"alice's listen on B: HTTP {stream.status}, acknowledged {acked_uris(ack)}")
    heard = None
    attempts = 0
    deadline = time.monotonic() + 10
    # B's subscription to Redis may take a moment: touch again until heard.
    while ack is not None and heard is None and time.monotonic() < deadline:
        attempts += 1
        answer = touch(a, ALICE_NOTES)
        if not touched(answer):
            details.append(f"touch {attempts} through A: {answer}")
        heard = stream.wait_for(is_update(ALICE_NOTES), 1.0)
    details.append(f"touches through A: {attempts}; heard on B: {short(heard) if heard else None}")
    stream.close()
    report.line(heard is not None, name, details)
    for process in (proxy_b, proxy_a, upstream, redis):
        tools.processes.stop(process)


# --- 6. the upstream restarted under open hub streams --------------------------

def check_restart(tools: Tools, report: Report, hub: str, upstream: Process, upstream_port: int,
                  publish_port: int) -> Process | None:
    name = ("[hub] the upstream killed and restarted on its port while alice's listen is open: the stream stays "
            "open, and a touch through the proxy afterwards is heard on it")
    details = []
    stream = listen(hub, ALICE, [ALICE_NOTES])
    ack = stream.wait_for(is_ack, HEAR)
    details.append(f"alice's listen: HTTP {stream.status}, acknowledged {acked_uris(ack)}")
    tools.processes.stop(upstream, sig=signal.SIGKILL)
    time.sleep(2)
    open_after_kill = not stream.ended()
    details.append(f"2 s after the upstream was killed the stream is {'open' if open_after_kill else 'ENDED'}"
                   + (f" ({stream.error})" if stream.error else ""))
    restarted = None
    try:
        restarted = tools.upstream("python", upstream_port, publish=publish_port, name="upstream-python-hub-restarted")
    except SetupError as error:
        details.append(f"the upstream did not start again: {error}")
    heard = None
    if restarted is not None:
        answer = touch(hub, ALICE_NOTES)
        details.append(f"touch through the proxy: {answer}")
        heard = stream.wait_for(is_update(ALICE_NOTES), HEAR)
        details.append(f"the restarted upstream's POSTs: {publications(restarted)}")
        details.append(f"heard on the open stream: {short(heard) if heard else None}"
                       + ("" if not stream.ended() else " (the stream has ended)"))
    stream.close()
    report.line(ack is not None and open_after_kill and heard is not None, name, details)
    return restarted


# --- main --------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option in ("out", "proxy", "upstreams-python", "upstreams-node", "upstreams-node-dir", "clients-python",
                   "clients-node", "clients-dir", "suite-node", "suite-dir", "redis-server"):
        parser.add_argument(f"--{option}", required=True)
    parser.add_argument("--only", help="comma-separated parts to run: sdk,conformance,containment,hub,redis")
    args = parser.parse_args()
    parts = set((args.only or "sdk,conformance,containment,hub,redis").split(","))
    tools = Tools(args)
    report = Report()

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    try:
        for kind in ("python", "typescript"):
            port, proxy_port, hub_upstream, hub_port, publish_port = free_ports(5)
            section(f"{kind} upstream: direct at http://127.0.0.1:{port}/mcp, proxy at :{proxy_port}, "
                    f"hub proxy at :{hub_port} (publish :{publish_port}) over an upstream at :{hub_upstream}")
            tools.upstream(kind, port)
            tools.proxy(f"proxy-{kind}", proxy_port, port, conformance=True)
            hub_upstream_process = tools.upstream(kind, hub_upstream, publish=publish_port,
                                                  name=f"upstream-{kind}-hub")
            tools.proxy(f"proxy-{kind}-hub", hub_port, hub_upstream, publish=publish_port)
            direct = f"http://127.0.0.1:{port}/mcp"
            proxied = f"http://127.0.0.1:{proxy_port}/mcp"
            hub = f"http://127.0.0.1:{hub_port}/mcp"
            if "containment" in parts:
                section(f"{kind} upstream: containment")
                check_containment(tools, report, kind, direct, proxied, hub, hub_upstream_process)
            if kind == "python" and "hub" in parts:
                section("hub mode: the publish endpoint, and the upstream restarted")
                check_publish_endpoint(report, f"http://127.0.0.1:{publish_port}/publish")
                check_restart(tools, report, hub, hub_upstream_process, hub_upstream, publish_port)
            if "sdk" in parts:
                section(f"{kind} upstream: the official SDK clients, direct and through the proxy")
                check_sdk(tools, report, kind, direct, proxied)
            if "conformance" in parts:
                section(f"{kind} upstream: the conformance suite, direct and through the proxy")
                check_conformance(tools, report, kind, direct, proxied)
            tools.processes.stop_all()
        if "redis" in parts:
            section("two hub proxies sharing one Redis")
            check_redis(tools, report)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt as error:
        print(f"error: interrupted ({error})", file=sys.stderr, flush=True)
        return 2
    finally:
        tools.processes.stop_all()
    print(f"checks took {time.monotonic() - started:.0f} s", flush=True)
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
