"""The fault matrix: every hook family x every kind of fault, against real processes.

A plugin ``faulty`` (installed as a distribution with an ``agent_link`` entry point, the way a
user installs one) misbehaves in one place (``FAULTY_WHERE``) in one way (``FAULTY_KIND``):
it raises, raises ``SystemExit(42)`` or ``KeyboardInterrupt``, answers with the wrong type (or a ``dict`` subclass that
raises once read outside the boundary's guarded call: ``hostile``),
hangs, answers something huge, imports slowly, or prints (to stdout: it must reach stderr only,
never the CLI's ``--json``, the MCP transport or the prompt hook's answer). Each case runs the surfaces the place is
reached from, as subprocesses (where a ``SystemExit`` would be seen as an exit status): the
CLI (``send``, ``health --json``), the MCP server over stdio (several calls in one session,
then stdin closed) and the prompt hook, each forked from one interpreter that imported the MCP
SDK once (agent_link_testing.forked_processes: a process of its own, importing agent-link and
``faulty`` itself). Each asserts the fault stayed in its plugin: every
command exits as it would without the plugin, every MCP request is answered and the server
exits 0 when its client leaves, the hook prints and exits 0, and the fault is reported naming
``faulty`` and ``AGENT_LINK_DISABLE_PLUGINS=faulty``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any, TypeAlias

import pytest

from agent_link_testing.dists import install_dist
from agent_link_testing.forked_processes import ForkedProcess, Zygote
from agent_link_testing.schema_cache import share_valid_schemas

# Signals interrupt hung hooks in the subprocesses; this file's own time limit runs on a thread.
pytestmark = pytest.mark.timeout(600, method="thread")

# the hook budget in the subprocesses: a hung synchronous hook costs this once; a healthy one
# must never reach it, and the core's own tool registration takes over 1 s on a loaded 2-core
# machine (parallel workers), where 1000 disabled it
BUDGET_MS = "5000"
# the budget of the cases that hang: each hung process waits it out, and the containment is the
# same at any budget; still several times the core's own registration on a loaded machine
# (0.4 s at a load of 11 on 2 cores), which the budget bounds too
HANG_BUDGET_MS = "2000"
ANSWER_S = 60  # the longest any one answer may take (far above what a contained fault costs)

PLUGIN = '''
import asyncio
import os
import time

from agent_link_core import hookimpl
from agent_link_core.envelope import render_element
from agent_link_core.harness import Delivery, Harness, OutputBudget, SessionListing
from agent_link_core.model import Caller, Session
from agent_link_core.records import EnvelopeContribution, PromptHook
from agent_link_core.tools.registry import ToolSpec
from mcp.shared.message import SessionMessage

WHERE = os.environ.get("FAULTY_WHERE", "")
KIND = os.environ.get("FAULTY_KIND", "")
BIG = 20 << 20


class Hostile(dict):
    """An answer honest while the boundary's guarded call runs, raising when the core reads it after."""

    def _guarded(self):
        from agent_link_core.boundary import _PLUGIN

        if _PLUGIN.get() is None:
            raise RuntimeError("faulty's answer read outside the guard")

    def __getitem__(self, key):
        self._guarded()
        return super().__getitem__(key)

    def get(self, *args):
        self._guarded()
        return super().get(*args)

    def __iter__(self):
        self._guarded()
        return super().__iter__()

    def items(self):
        self._guarded()
        return super().items()

    def __len__(self):
        self._guarded()
        return super().__len__()


def act(where, fine, wrong=None, huge=None, hostile=None):
    """What the plugin does at ``where``: ``fine`` unless the fault is injected here."""
    if where != WHERE:
        return fine
    if KIND == "hostile":
        return hostile()
    if KIND == "raise":
        raise RuntimeError("faulty fails in " + where)
    if KIND == "exit":
        raise SystemExit(42)
    if KIND == "interrupt":
        raise KeyboardInterrupt()
    if KIND == "hang":
        time.sleep(600)
    if KIND == "slow":  # a slow import within the budget: the plugin loads and works
        time.sleep(0.5)
    if KIND == "print":  # no fault of its own: what it prints must not reach a stdout agent-link answers on
        print("JUNK printed by faulty in " + where)
    if KIND == "wrong":
        return wrong
    if KIND == "huge":
        return huge()
    return fine


async def aact(where, fine, wrong=None, huge=None, hostile=None):
    if where == WHERE and KIND == "hang":
        await asyncio.Event().wait()
    return act(where, fine, wrong, huge, hostile)


act("import", None)


class FaultyHarness(Harness):
    name = "faulty"
    output_budget = OutputBudget(tool_result_bytes=40_000, push_bytes=200)  # every push asks agent_link_push_notice

    def identify_caller(self, meta, env):
        return act("identify", None, wrong="faulty:someone")

    async def list_sessions(self, *, include_archived=False, limit=200):
        fine = SessionListing([Session("faulty:one", "faulty", "one", title="Faulty one")])
        return await aact("list", fine, wrong=["faulty:one"],
                          huge=lambda: SessionListing([Session(f"faulty:s{i}", "faulty", f"s{i}") for i in range(200_000)]),
                          hostile=lambda: SessionListing(fine.sessions, provider=Hostile(available=True)))

    async def get_session(self, session_id):
        return Session("faulty:one", "faulty", "one") if session_id == "one" else None

    async def deliver(self, message, envelope, options):
        return await aact("deliver", Delivery(), wrong=True, hostile=lambda: Delivery(delivered=True, via="x", evidence=Hostile(x=1)))

    def health(self):
        return act("harness_health", {"ok": True}, wrong={"not json": {1, 2}}, huge=lambda: {"blob": "x" * BIG}, hostile=lambda: Hostile(ok=True))

    async def serve(self, app, peer):
        act("serve", None)  # synchronously: a hang here holds the server's event loop
        if WHERE == "serve" and KIND == "wrong":  # junk written where notifications go
            await WRITE[0].send(SessionMessage({"not": "a JSON-RPC model"}))


async def echo(app, arguments, call):
    return await aact("tool", {"echo": "fine"}, wrong=["not", "a", "dict"], huge=lambda: {"echo": "x" * BIG}, hostile=lambda: Hostile(echo="fine"))


ECHO = ToolSpec("faulty_echo", "Echo.", {"type": "object", "properties": {}, "additionalProperties": False},
                {"echo": {"type": "string"}}, echo)


@hookimpl
def agent_link_register_harnesses(register):
    register(act("register", FaultyHarness(), wrong="not a harness"))


@hookimpl
def agent_link_register_tools(register):
    register(act("register_tools", ECHO))


@hookimpl
def agent_link_register_prompt_hooks(register):
    register(PromptHook("faulty", "agent_link_faulty.adapter"))


@hookimpl
def agent_link_listed_tools(tools):
    return act("listed", None, wrong=42)


@hookimpl
def agent_link_server_tasks():
    async def task():
        act("server_task", None)  # synchronously, as serve above
    return [task]


class Watcher:
    def inbound(self, item):  # wrong: an answer to every message that the transport could not encode
        return act("watch", None, wrong=SessionMessage({"not": "a JSON-RPC model"}), huge=lambda: None)

    def outbound(self, item):
        return act("watch", None, wrong=SessionMessage({"not": "a JSON-RPC model"}), huge=lambda: None)

    def view(self):
        return act("watch", {"watched": True}, wrong={"not json": {1, 2}}, huge=lambda: {"blob": "x" * BIG})


class Sneaky:
    """A peer whose attributes raise when the boundary looks at them."""

    def __getattr__(self, name):
        raise SystemExit(42)


WRITE = []


@hookimpl
def agent_link_mcp_connection(write):
    WRITE.append(write)
    return act("connection", Watcher(), wrong=Sneaky())


@hookimpl
def agent_link_app_opened():
    return act("opened", None, wrong=42)


@hookimpl
def agent_link_on_event(event):
    return act("event", None, wrong=42)


@hookimpl
def agent_link_render_envelopes(messages):
    huge = lambda: {m["id"]: EnvelopeContribution({}, [render_element("faulty-note", [], "x" * BIG)]) for m in messages}
    return act("envelope", None, wrong="<b>bold</b>", huge=huge,
               hostile=lambda: Hostile({m["id"]: EnvelopeContribution({}, [render_element("faulty-note", [])]) for m in messages}))


@hookimpl
def agent_link_fit_read(read):
    return act("fit", None, wrong="all of it", huge=lambda: 10**12)


@hookimpl
def agent_link_push_notice(message):
    return act("notice", None, wrong=42, huge=lambda: "x" * BIG)


@hookimpl
def agent_link_health():
    return act("health", ("faulty", {"ok": True}), wrong="all fine", huge=lambda: ("faulty", {"blob": "x" * BIG}),
               hostile=lambda: ("faulty", Hostile(ok=True)))
'''

ADAPTER = '''
from agent_link_faulty.plugin import act


def handle(event, payload, ctx):
    return act("prompt", {"ok": True}, wrong={"not json": {1, 2}}, huge=lambda: {"blob": "x" * (20 << 20)})
'''

# where -> the faults that apply there (a slow import is the import's own fault)
FAULTS = ("raise", "exit", "interrupt", "wrong", "hang", "huge")
PLACES: dict[str, tuple[str, ...]] = {
    "import": ("raise", "exit", "interrupt", "hang", "slow", "print"),
    "register": ("raise", "exit", "interrupt", "wrong", "hang", "print"),
    "identify": ("raise", "exit", "interrupt", "wrong", "hang", "print"),
    # every App.create: the CLI's send and health, the MCP server's start
    "opened": ("raise", "exit", "interrupt", "wrong", "hang", "print"),
    "event": ("raise", "exit", "interrupt", "wrong", "hang", "print"),
    "envelope": ("raise", "exit", "interrupt", "wrong", "hang", "huge", "print", "hostile"),
    # an inbox read that found mail, a push larger than the recipient's host shows
    "fit": ("raise", "exit", "interrupt", "wrong", "hang", "huge"),
    "notice": ("raise", "exit", "interrupt", "wrong", "hang", "huge"),
    "deliver": ("raise", "exit", "interrupt", "wrong", "hang", "print", "hostile"),
    "tool": ("raise", "exit", "interrupt", "wrong", "hang", "huge", "print", "hostile"),
    # what tools/list lists, chosen once at the server's start
    "listed": ("raise", "exit", "interrupt", "wrong", "hang"),
    "health": ("raise", "exit", "interrupt", "wrong", "hang", "huge", "print", "hostile"),
    "harness_health": ("raise", "exit", "interrupt", "wrong", "hang", "huge", "print", "hostile"),
    "list": ("raise", "exit", "interrupt", "wrong", "huge", "print", "hostile"),
    "prompt": ("raise", "exit", "interrupt", "wrong", "hang", "huge", "print"),
    # an MCP server's background work: a harness's serve, a plugin's server task
    "serve": ("raise", "exit", "interrupt", "wrong", "hang"),
    "server_task": ("raise", "exit", "interrupt", "hang"),
    # the watch of an MCP connection: the hook's call, then each message read and written, and health's view of it
    "connection": ("raise", "exit", "interrupt", "wrong", "hang"),
    "watch": ("raise", "exit", "interrupt", "wrong", "hang", "huge"),
}
# which surfaces reach each place
CLI_SEND = {"import", "register", "opened", "identify", "event", "envelope", "deliver"}
CLI_HEALTH = {"health", "harness_health", "opened"}
HOOK = {"import", "register", "prompt"}
CASES = [(where, kind) for where, kinds in PLACES.items() for kind in kinds]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("faulty-site")
    install_dist(folder, "agent_link_faulty", {"plugin.py": PLUGIN, "adapter.py": ADAPTER},
                 entry_name="faulty", entry_module="agent_link_faulty.plugin")
    return folder


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory, site: Path, valid_schemas_dir: Path) -> Iterator[Zygote]:
    """The interpreter the matrix's processes are forked from (each process gets its case's
    environment, ``PYTHONPATH`` included)."""
    folder = tmp_path_factory.mktemp("zygote")
    (folder / "home").mkdir()
    started = Zygote(folder, environment(site, folder / "home", "", "", valid_schemas_dir))
    yield started
    started.close()


def environment(site: Path, home: Path, where: str, kind: str, valid_schemas: Path) -> dict[str, str]:
    """The processes' environment: their own HOME and caches (the valid schemas' shared,
    agent_link_testing.schema_cache), only the plugin ``faulty``, faulting at ``where`` in ``kind``."""
    share_valid_schemas(home / ".cache", valid_schemas)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LINK_")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), AGENT_LINK_LOAD_PLUGINS="faulty",
               AGENT_LINK_HOOK_TIMEOUT_MS=HANG_BUDGET_MS if kind == "hang" else BUDGET_MS, AGENT_LINK_ADDRESS="team:alice",
               PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])),
               FAULTY_WHERE=where, FAULTY_KIND=kind)
    return env


Process: TypeAlias = "subprocess.Popen[Any] | ForkedProcess"


def start_cli(env: dict[str, str], *args: str, stdin: str = "", zygote: Zygote | None = None) -> Process:
    """``agent-link ARGS`` started (``stdin`` written and closed), forked from ``zygote`` or,
    when None, as a new interpreter; :func:`finished` collects it."""
    read_end, write_end = os.pipe()
    os.write(write_end, stdin.encode())  # a few bytes: the pipe holds them whatever the process does
    os.close(write_end)
    try:
        if zygote is not None:
            return zygote.start(args, env, stdin=read_end, text=True)
        return subprocess.Popen([sys.executable, "-m", "agent_link_core", *args], env=env, stdin=read_end,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(read_end)


def finished(proc: Process) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=ANSWER_S * 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args[3:]} did not end; stderr: {err[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def reported(problems: list[dict[str, Any]]) -> bool:
    return any(p["plugin"] == "faulty" and "AGENT_LINK_DISABLE_PLUGINS=faulty" in p["fix"] for p in problems)


class McpSession:
    """A raw JSON-RPC client of ``agent-link mcp`` over the process's pipes (forked from
    ``zygote``, or a new interpreter when None)."""

    def __init__(self, env: dict[str, str], zygote: Zygote | None = None) -> None:
        self.proc: Process = (zygote.start(["mcp"], env) if zygote is not None else
                              subprocess.Popen([sys.executable, "-m", "agent_link_core", "mcp"], env=env, stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr: list[bytes] = []
        self.reader = threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True)
        self.err_reader = threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True)
        self.reader.start()
        self.err_reader.start()
        self.next_id = 0

    @staticmethod
    def _pump(stream: Any, put: Any) -> None:
        for line in iter(stream.readline, b""):
            put(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            try:
                line = self.lines.get(timeout=ANSWER_S)
            except queue.Empty:
                raise AssertionError(f"{method} not answered; server alive: {self.proc.poll() is None}; "
                                     f"stderr: {b''.join(self.stderr)[-2000:]!r}") from None
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                return answer

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.request("tools/call", {"name": tool, "arguments": arguments or {}})
        assert "result" in answer, answer
        return answer["result"]["structuredContent"]

    def close(self) -> int:
        """Close stdin and wait for the exit status; every line the server wrote after the last answer read must be JSON too."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        status = self.proc.wait(timeout=ANSWER_S)
        self.reader.join(timeout=ANSWER_S)
        self.err_reader.join(timeout=ANSWER_S)
        while not self.lines.empty():
            json.loads(self.lines.get())
        return status


def check_mcp(env: dict[str, str], where: str, kind: str, zygote: Zygote) -> tuple[list[dict[str, Any]], str]:
    """One MCP session reaching every place; returns the problems health reported last and the server's stderr."""
    session = McpSession(env, zygote)
    try:
        opened = session.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                "clientInfo": {"name": "fault-matrix", "version": "1"}})
        assert "result" in opened, opened
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = {t["name"] for t in session.request("tools/list", {})["result"]["tools"]}
        assert {"message_agent", "read_agent_link_inbox", "agent_link_health"} <= listed
        hung = None
        if (where, kind) == ("tool", "hang"):  # asked first and never answered: everything else still is
            session.next_id = hung = 1000
            session.send({"jsonrpc": "2.0", "id": hung, "method": "tools/call", "params": {"name": "faulty_echo", "arguments": {}}})
        sent = session.call("message_agent", {"to": "team:bob", "message": "hello bob"})
        assert sent["ok"], sent
        if "faulty" in json.dumps(session.call("agent_link_health")["harnesses"]):
            session.call("message_agent", {"to": "faulty:one", "message": "hello faulty"})  # ok or a contained failure
        read = session.call("read_agent_link_inbox", {"markAsDelivered": False})
        assert read["ok"]
        if where == "fit":  # the mail still comes, whole, and the read says which plugin failed
            assert read["messages"] and "plugin_failed" in [w["code"] for w in read.get("warnings", [])], read
        assert session.call("list_agents")["ok"]
        if "faulty_echo" in listed and (where, kind) != ("tool", "hang"):
            echoed = session.call("faulty_echo")
            assert echoed["ok"] == (where != "tool" or kind == "print"), echoed
        health = session.call("agent_link_health")  # still serving after every fault
        assert health["ok"], health
        if hung is not None:  # the client gives up on it past the budget, as MCP clients do
            time.sleep(int(env["AGENT_LINK_HOOK_TIMEOUT_MS"]) / 1000 + 0.5)
            session.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": hung}})
            health = session.call("agent_link_health")
        json.dumps(health)
        assert len(json.dumps(health)) < 1 << 20  # nothing huge came through
    finally:
        status = session.close()
    assert status == 0, (status, b"".join(session.stderr)[-2000:])
    return health["plugins"]["problems"] + health["plugins"].get("elsewhere", []), b"".join(session.stderr).decode(errors="replace")


@pytest.mark.parametrize(("where", "kind"), CASES, ids=[f"{w}-{k}" for w, k in CASES])
def test_a_fault_stays_in_its_plugin(where: str, kind: str, site: Path, tmp_path: Path, valid_schemas_dir: Path, zygote: Zygote) -> None:
    # The CLI's commands run at the same time as the MCP session, each in a HOME of its own (so
    # the problems it reports are its own): a case that hangs waits out its budget once for
    # them all. The prompt hook runs after the session, where the server left its state.
    def env_in(surface: str) -> dict[str, str]:
        (tmp_path / surface).mkdir()
        return environment(site, tmp_path / surface, where, kind, valid_schemas_dir)

    as_json = ("--json",) if kind == "print" else ()
    send = start_cli(env_in("send"), "send", "team:bob", "hello from the CLI", *as_json, zygote=zygote) if where in CLI_SEND else None
    health = start_cli(env_in("health"), "health", "--json", zygote=zygote) if where in CLI_HEALTH else None
    env = env_in("mcp")
    if where == "fit":  # mail for the reader, so that its reads have something to fit
        mailed = finished(start_cli({**env, "AGENT_LINK_ADDRESS": "team:bob"}, "send", "team:alice", "to read", zygote=zygote))
        assert mailed.returncode == 0, mailed.stderr[-2000:]
    try:
        problems, mcp_stderr = check_mcp(env, where, kind, zygote)
    finally:
        done = {name: finished(proc) for name, proc in (("send", send), ("health", health)) if proc}
    if where == "fit":
        done["inbox"] = finished(start_cli(env, "inbox", "--peek", "--json", zygote=zygote))
    if where in HOOK:
        payload = json.dumps({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"})
        done["hook"] = finished(start_cli(env, "hook", "faulty", "UserPromptSubmit", stdin=payload, zygote=zygote))
    if "send" in done:
        out = done["send"]
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        assert "messageId" in json.loads(out.stdout) if as_json else out.stdout.startswith("queued:"), out.stdout
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
    if "health" in done:
        out = done["health"]
        data = json.loads(out.stdout)
        if kind == "print":  # no fault
            assert out.returncode == 0 and data["ok"], (out.returncode, data["problems"])
        else:  # a plugin's fault is health's problem
            assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
            assert not data["ok"] and any(p.get("plugin") == "faulty" for p in data["problems"]), data["problems"]
        problems += data["plugins"]["problems"] + data["plugins"].get("elsewhere", [])
    if "inbox" in done:
        out = done["inbox"]
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        data = json.loads(out.stdout)
        assert data["messages"] and "plugin_failed" in [w["code"] for w in data["warnings"]], data
    if "hook" in done:
        out = done["hook"]
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        # the adapter answers unless its plugin was left out (import, registration) or it faulted
        assert out.stdout == ('{"ok": true}\n' if kind in ("slow", "print") else ""), (out.stdout, out.stderr[-2000:])
        if where == "prompt" and kind != "print":
            assert "agent-link hook:" in out.stderr  # one line saying why nothing was printed
            return  # the hook's faults are its own process's; no other surface reaches the adapter
    if kind == "print":  # what it printed went to stderr (the MCP server's stdout lines all parsed as JSON-RPC)
        assert all("JUNK" not in out.stdout for out in done.values()), {k: out.stdout for k, out in done.items()}
        assert "JUNK printed by faulty" in mcp_stderr + "".join(out.stderr for out in done.values())
    elif kind != "slow":
        assert reported(problems), problems


# every fault a start-up registration can make, in a harness's registration and a tool's
REGISTRATION_FAULTS = [(where, kind) for where in ("register", "register_tools") for kind in PLACES["register"] if kind != "print"]


@pytest.mark.parametrize(("where", "kind"), [*REGISTRATION_FAULTS, ("", "")],
                         ids=[f"{w}-{k}" for w, k in REGISTRATION_FAULTS] + ["healthy"])
def test_a_plugin_whose_registration_faulted_has_no_prompt_hook(where: str, kind: str, site: Path, tmp_path: Path,
                                                                valid_schemas_dir: Path, zygote: Zygote) -> None:
    """issue 31: in a fresh state dir no server has written the prompt-hook registry yet, so the
    hook finds the plugins itself: one whose registration raised, exited, was refused or hung
    is left out as a server leaves it out, its adapter never runs, and the prompt goes on
    (exit 0, nothing printed, the fault said on stderr). A healthy plugin's adapter answers."""
    env = environment(site, tmp_path, where, kind, valid_schemas_dir)
    (tmp_path / ".agent-link").mkdir()  # a state dir (the hook stays silent without one), with no registry
    payload = json.dumps({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"})
    out = finished(start_cli(env, "hook", "faulty", "UserPromptSubmit", stdin=payload, zygote=zygote))
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout == ("" if where else '{"ok": true}\n'), (out.stdout, out.stderr[-2000:])
    if where:
        assert "'faulty' failed in agent_link_register_" in out.stderr and "AGENT_LINK_DISABLE_PLUGINS=faulty" in out.stderr
        again = finished(start_cli(env, "hook", "faulty", "UserPromptSubmit", stdin=payload, zygote=zygote))
        assert (again.returncode, again.stdout, again.stderr) == (0, "", "")  # left out in the registry: no rebuild, no wait


def test_sigterm_ends_the_server_while_a_hook_holds_its_loop(site: Path, tmp_path: Path, valid_schemas_dir: Path) -> None:
    """A hook that blocks the event loop for ten minutes (a budget longer than that) does not
    keep the server alive after SIGTERM: it exits 0 within its shutdown bound."""
    env = {**environment(site, tmp_path, "health", "hang", valid_schemas_dir), "AGENT_LINK_HOOK_TIMEOUT_MS": "0"}
    session = McpSession(env)
    try:
        session.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "fault-matrix", "version": "1"}})
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        session.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "agent_link_health", "arguments": {}}})
        time.sleep(1)  # let the hook start holding the loop (SIGTERM must work before that too)
        session.proc.terminate()
        assert session.proc.wait(timeout=ANSWER_S) == 0
    finally:
        if session.proc.poll() is None:
            session.proc.kill()


def test_a_server_whose_client_died_exits_even_with_its_stdin_open(site: Path, tmp_path: Path, valid_schemas_dir: Path) -> None:
    """The client (the server's parent) dies once the server answered it, while something else
    still holds the server's stdin open: the server notices its parent is gone and exits."""
    env = environment(site, tmp_path, "", "", valid_schemas_dir)
    read_end, write_end = os.pipe()  # this test keeps the write end: the server never reads EOF
    client = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'agent_link_core', 'mcp'], "
              f"stdin={read_end}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=({read_end},)); "
              "print(p.pid, flush=True); p.stdout.readline()")  # gone once the server answered initialize
    try:
        parent = subprocess.Popen([sys.executable, "-c", client], env=env, stdout=subprocess.PIPE, text=True, pass_fds=(read_end,))
        assert parent.stdout is not None
        server = int(parent.stdout.readline())
        os.write(write_end, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}}}).encode() + b"\n")
        assert parent.wait(timeout=ANSWER_S) == 0
        deadline = time.monotonic() + ANSWER_S
        while time.monotonic() < deadline and _state(server) != "Z":
            time.sleep(0.2)
        assert _state(server) == "Z", "the orphaned server still runs"
    finally:
        os.close(read_end)
        os.close(write_end)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except (OSError, IndexError):
        return "Z"
