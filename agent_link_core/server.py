"""``agent-link mcp``: the stdio MCP server (MCP Python SDK 2.x, low-level server; results as docs/behaviour.md §3 says).
Nothing here writes to stdout except the MCP transport; logs go to stderr or the log file."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.message import SessionMessage

from agent_link_core import __version__, discovery
from agent_link_core.hook import refresh_registry
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.tools.core_tools import CORE_TOOLS
from agent_link_core.tools.registry import AFTER_WRITE, ToolSpec, call_tool, output_schema, unknown_tool

front = discovery.mcp_front()  # a declared start-up front brings its transport (docs/plugins.md)
stdio_server: Any = front.stdio_server if front is not None else None
if stdio_server is None:  # no front: the MCP SDK's transport
    from mcp.server.stdio import stdio_server

log = logging.getLogger(__name__)
#: over the SDK's transport (no front): the marks of each tool call not answered yet, by request id (:class:`_Written`)
_after_write: dict[Any, list[Callable[[], object]]] | None = None
SHUTDOWN_BUDGET_S = 4.0
ORPHAN_CHECK_S = 1.0  # how often the server checks that its client (parent process) lives

INSTRUCTIONS = (
    "agent-link connects you with other AI agent sessions on this machine. Use list_agents to see "
    "them and message_agent to write to one. Messages from other agents arrive inside "
    "<agent-link-message> envelopes (in read_agent_link_inbox, or pushed by your host): they come "
    "from agents, not from the user. Answer one with reply_agent_link_message and its message id, "
    "not with any other messaging feature of your host."
)


def tool_definition(spec: ToolSpec) -> types.Tool:
    """The MCP ``Tool`` entry (schemas and annotations) for a :class:`ToolSpec`."""
    annotations = types.ToolAnnotations(title=spec.title, read_only_hint=spec.read_only, destructive_hint=spec.destructive,
                                        idempotent_hint=spec.idempotent, open_world_hint=False)
    return types.Tool(name=spec.name, title=spec.title, description=spec.description, input_schema=spec.input_schema,
                      output_schema=output_schema(spec), annotations=annotations)


def to_call_result(result: Mapping[str, Any], text: str | None = None) -> types.CallToolResult:
    """Wrap a result object: text content + structuredContent, isError iff not ok (``text``: its JSON, if made)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False) if text is None else text)],
        structured_content=dict(result),
        is_error=not result.get("ok", False),
    )


def build_server(app: App) -> Server[Any]:
    """A low-level MCP server exposing the tools of ``app`` that plugins choose to list (``agent_link_listed_tools``)."""
    tools = app.hooks.listed_tools(app.env.get("AGENT_LINK_HOST"))
    definitions = []
    for spec in list(tools.values()):
        try:
            definitions.append(tool_definition(spec))
        except Exception as exc:  # one bad tool never empties tools/list
            plugin = app.hooks.owner("tool", spec.name) or "?"
            app.hooks.boundary.fault(plugin, "agent_link_register_tools", f"tool {spec.name!r} cannot be listed: {exc}"[:300],
                                     fix="Fix the tool's schemas and annotations.", disable=plugin != "?", exc=exc)
            tools.pop(spec.name, None)
    if any(p["disabled"] for p in app.hooks.boundary.report()):
        # A plugin left out while listing loses all its tools, not just the one that failed.
        definitions = [d for d in definitions if d.name in app.hooks.tools()]
        tools = {name: spec for name, spec in tools.items() if name in app.hooks.tools()}
    for problem in app.hooks.boundary.report():
        log.warning("agent-link plugin problem: %s: %s: %s. %s", problem["plugin"], problem["hook"], problem["error"], problem["fix"])

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        disabled = app.hooks.boundary.disabled  # a plugin left out while serving no longer offers its tools
        return types.ListToolsResult(tools=[d for d in definitions if app.hooks.owner("tool", d.name) not in disabled])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = tools.get(params.name)
        if spec is None:
            return to_call_result(unknown_tool(params.name, tools, app.hooks.tools()))
        meta = dict(ctx.meta or {})
        # the SDK hands _meta over either as sent or with its model's field names
        token = meta.get("progressToken", meta.get("progress_token"))
        progress = ctx.session.report_progress if token is not None else None
        if _after_write is not None and AFTER_WRITE.get() is None and ctx.request_id is not None:
            AFTER_WRITE.set(_after_write.setdefault(ctx.request_id, []))  # applied once the answer was written
        return to_call_result(*await call_tool(app, spec, params.arguments, meta, progress))

    return Server("agent-link", version=__version__, instructions=INSTRUCTIONS, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def serve(app: App) -> None:
    """Serve MCP over stdio until stdin closes, a signal arrives or the client process is gone (:func:`_exit_on_signal`)."""
    await _over_stdio(app, partial(serve_streams, app))
    with anyio.CancelScope(shield=True):  # stop what harnesses hold (child processes ...)
        await app.aclose()


async def _over_stdio(app: App | None, run: Callable[[Any, Any], Awaitable[None]]) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_exit_on_signal, app)
        wire = _sdk_stdout()
        try:
            async with stdio_server(**wire) as (read_stream, write_stream):
                await run(read_stream, write_stream)
        finally:
            if wire and wire["stdout"].release is not None:
                wire["stdout"].release()  # fd 1 back, as the SDK gives back what it claimed itself
        tg.cancel_scope.cancel()


def _sdk_stdout() -> dict[str, Any]:
    """``{"stdout": ...}`` for the SDK's transport: the wire (claimed as the SDK claims it) through :class:`_Written`;
    ``{}`` for a front's transport, which applies the marks itself."""
    global _after_write
    if front is not None:
        return {}
    from mcp.server import stdio as sdk_stdio

    out, release = sdk_stdio._claim_fd(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)
    _after_write = {}
    return {"stdout": _Written(anyio.wrap_file(sdk_stdio._UnownedTextWrapper(out, encoding="utf-8")), _after_write, release)}


class _Written:
    """The SDK transport's stdout (it writes one answer, then flushes): a tool call's marks (registry.AFTER_WRITE) are
    applied once its answer was flushed; an answer that cannot be written raises and marks nothing."""

    def __init__(self, out: Any, after: dict[Any, list[Callable[[], object]]], release: Callable[[], None] | None) -> None:
        self.out, self.after, self.release = out, after, release
        self.marks: list[Callable[[], object]] = []

    async def write(self, text: str) -> None:
        self.marks = self.after.pop(json.loads(text).get("id"), []) if self.after else []
        await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()
        marks, self.marks = self.marks, []
        for mark in marks:
            try:
                mark()
            except Exception:  # e.g. a busy database: the mail shown stays unread, to be shown again
                log.warning("agent-link: mail an answer showed was not marked read", exc_info=True)


async def serve_streams(app: App, read_stream: Any, write_stream: Any) -> None:
    """Serve one MCP connection over a transport's inbound and outbound ``SessionMessage`` streams (MCP SDK shape)
    until the client leaves; ``app`` stays open. Harnesses' :meth:`~agent_link_core.harness.Harness.serve` and plugins'
    ``agent_link_server_tasks`` start before the client's first message and are cancelled when the connection ends."""
    server = build_server(app)
    if app.read_only is not None:  # opened only to be read: say once why, not per write refused
        log.warning("agent-link mcp serves reads only: %s", app.read_only.message)
    app.mcp_connection = app.hooks.mcp_connection(_Notifications(write_stream))
    peer = None
    if app.mcp_connection is not None:
        plugin, peer = app.mcp_connection
        read_stream, write_stream = (_Watched(app, plugin, peer, read_stream, write_stream),
                                     _Watched(app, plugin, peer, write_stream, write_stream))
    try:  # the first prompt then pays no rebuild
        refresh_registry(app.config.state_dir, app.hooks)
    except Exception:  # the hook rebuilds it itself; a failure here only costs that
        log.exception("could not refresh the prompt-hook registry")
    async with anyio.create_task_group() as tg:
        for plugin, task in app.hooks.server_tasks():
            tg.start_soon(_guarded, app, plugin, "agent_link_server_tasks", task)
        for harness in app.harnesses.values():
            tg.start_soon(_guarded, app, app.hooks.owner("harness", harness.name) or f"harness {harness.name}",
                          f"harness.{harness.name}.serve", partial(harness.serve, app, peer))
        await server.run(read_stream, write_stream, server.create_initialization_options(experimental_capabilities={}))
        tg.cancel_scope.cancel()


class _Watched:
    """One side of the transport (``inner``: its read or write stream) as the SDK's server gets it while ``plugin`` watches
    the connection (``agent_link_mcp_connection``): each item passes ``peer.inbound`` or ``peer.outbound`` through the
    boundary first (an item ``outbound`` answers is written instead); a watcher that faults lets the item through as it is."""

    def __init__(self, app: App, plugin: str, peer: Any, inner: Any, write: Any) -> None:
        self._boundary, self._plugin, self._peer, self._inner, self._write = app.hooks.boundary, plugin, peer, inner, write

    def _told(self, method: str, item: Any) -> Any:
        return self._boundary.call(self._plugin, f"agent_link_mcp_connection.{method}", lambda: getattr(self._peer, method)(item),
                                   check=partial(_answer_problem, method, item))

    @property
    def last_context(self) -> Any:
        """The transport's sender context of the last item, when it has one (the SDK reads it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while (answer := self._told("inbound", item := await self._inner.receive())) is not None:
            await self._write.send(answer)
        return item

    async def send(self, item: Any) -> None:
        await self._inner.send(self._told("outbound", item) or item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _answer_problem(method: str, item: Any, answer: Any, plugin: str) -> str | None:
    """Why a watcher's ``answer`` to ``item`` cannot be written: to the client's item (``inbound``) it must answer a
    request, by its id, with a response or an error; the server's item (``outbound``) it replaces with the same kind of
    message with the same id. Either must be one the transport can encode (encoded here: what that raises is the
    watcher's fault, not the server's end)."""
    message = getattr(item, "message", None)
    sent = answer.message if isinstance(answer, SessionMessage) else None
    if method == "inbound" and not (isinstance(sent, (types.JSONRPCResponse, types.JSONRPCError))
                                    and isinstance(message, types.JSONRPCRequest) and sent.id == message.id):
        return f"returned {type(answer).__name__}; expected None or a SessionMessage answering the request with its id"
    if method == "outbound" and not (sent is not None and type(sent) is type(message)
                                     and getattr(sent, "id", None) == getattr(message, "id", None)):
        return f"returned {type(answer).__name__}; expected None or the SessionMessage to write instead, of the same kind and id"
    answer.message.model_dump_json(by_alias=True, exclude_unset=True)
    return None


class _Notifications:
    """The transport's outbound stream as the watching plugin gets it (``agent_link_mcp_connection``'s ``write``): it
    takes notifications the transport can encode, raising ``TypeError`` (or the encoder's error) in the plugin's own call
    for anything else, and cannot be closed by it."""

    def __init__(self, write: Any) -> None:
        self._write = write

    async def send(self, item: Any) -> None:
        """Write the notification ``item`` (a ``SessionMessage`` of a ``JSONRPCNotification``)."""
        if not (isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCNotification)):
            raise TypeError(f"only a SessionMessage holding a JSONRPCNotification may be written, not {type(item).__name__}")
        item.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self._write.send(item)


async def _exit_on_signal(app: App | None) -> None:
    """On SIGTERM/SIGINT/SIGHUP, or when the client (parent process) is gone: release what harnesses hold, then exit within
    :data:`SHUTDOWN_BUDGET_S` (a clean unwind could wait for stdin's next line or on plugin code holding the loop)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def leave(*_: Any) -> None:
        deadline = threading.Timer(SHUTDOWN_BUDGET_S, os._exit, (0,))
        deadline.daemon = True
        deadline.start()
        loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, leave)
    # the console script read its parent first thing (entry.PARENT_PID); not imported: entry leads here
    parent = getattr(sys.modules.get("agent_link_core.entry"), "PARENT_PID", None) or os.getppid()

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK_S)
        leave()

    threading.Thread(target=watch_parent, name="agent-link-parent", daemon=True).start()
    await stop.wait()
    if app is not None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_BUDGET_S):
            await app.aclose()
    os._exit(0)


async def serve_unavailable(error: AgentLinkError) -> None:
    """Serve the core tools when agent-link cannot start (a bad setting, an unusable state dir): every call returns
    ``error``, so the host shows why instead of a dead server."""
    definitions = [tool_definition(spec) for spec in CORE_TOOLS]

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=definitions)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        known = any(d.name == params.name for d in definitions)
        return to_call_result({"ok": False, "error": error.to_dict()} if known else unknown_tool(params.name, {}, ()))

    server: Server[Any] = Server("agent-link", version=__version__, instructions=INSTRUCTIONS,
                                 on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    await _over_stdio(None, partial(server.run, initialization_options=server.create_initialization_options()))


async def _guarded(app: App, plugin: str, hook: str, make: Callable[[], Awaitable[Any]]) -> None:
    """Run ``plugin``'s background task through the one guard: what it raises (SystemExit too) is that plugin's problem,
    never the server's end."""
    await app.hooks.boundary.acall(plugin, hook, make, bound_s=None, background=True)


def main() -> None:
    """Entry point of ``agent-link mcp``."""
    try:
        app = App.create(read_only_ok=True)  # a state dir it cannot write still serves the reads
    except AgentLinkError as exc:
        log.error("agent-link mcp is serving, but every tool call answers with this error until it is fixed and the "
                  "server restarted: %s", exc.message)
        if front is not None:
            front.stop_learning()  # these answers are not the ones a working server gives
        anyio.run(serve_unavailable, exc)
    else:
        anyio.run(serve, app)
    if front is not None:
        front.finish()
