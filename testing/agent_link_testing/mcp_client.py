"""A real MCP client session against ``agent-link mcp`` in a subprocess (stdio).

Uses the MCP Python SDK's client (:func:`agent_link_mcp`), or a hand-written JSON-RPC client
for bytes the SDK client cannot send (:func:`raw_mcp_server`, :func:`exchange_lines` for a
server command of the test's choosing). ``revision`` says how it opens the connection:
``"handshake"`` (``initialize``, MCP revisions up to 2025-11-25), ``"stateless"``
(``server/discover``, revision 2026-07-28), or ``"auto"`` (``server/discover`` first and
``initialize`` when the server answers "method not found", as Claude Code 2.1.332 does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, RequestParamsMeta

from agent_link_testing import forked_processes

CALL_TIMEOUT_S = 60.0


@dataclass
class AgentLinkClient:
    """A connected client; :meth:`call` returns the tool's result object.

    ``init`` is the ``initialize`` result, or the ``server/discover`` result on a stateless
    connection; ``discover_refused`` says the server answered ``server/discover`` with
    "method not found" (``revision="auto"`` then used ``initialize``).
    """

    session: ClientSession
    init: Any
    discover_refused: bool = False

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool and return its JSON result, checking the result contract on the way:
        the text content and structuredContent carry the same object, and isError == not ok."""
        result = await self.session.call_tool(name, dict(arguments or {}), read_timeout_seconds=CALL_TIMEOUT_S, meta=cast("RequestParamsMeta", dict(meta)) if meta else None)
        assert len(result.content) == 1, result
        text_obj = json.loads(result.content[0].text)
        assert result.structured_content == text_obj, (result.structured_content, text_obj)
        assert result.is_error == (not text_obj["ok"]), text_obj
        return text_obj

    async def tools(self) -> dict[str, Any]:
        """``{name: Tool}`` from tools/list."""
        listed = await self.session.list_tools()
        return {t.name: t for t in listed.tools}


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current (test-isolated) environment plus ``extra``."""
    env = dict(os.environ)
    env.update(extra or {})
    return env


@asynccontextmanager
async def agent_link_mcp(env: Mapping[str, str] | None = None, args: tuple[str, ...] = ("mcp",),
                         revision: str = "handshake", launcher: Sequence[str] = ()) -> AsyncIterator[AgentLinkClient]:
    """Start ``agent-link mcp`` (``python -m agent_link_core mcp``) and yield a client that
    opened the connection as ``revision`` says (see the module docstring).

    Without a ``launcher`` the server is forked from the test process's zygote
    (:func:`agent_link_testing.forked_processes.shared`: the MCP SDK imported once, not per
    server), its stdio and exit status those of the command the client starts.

    :param launcher: a command prefix the server runs under (e.g.
        :func:`agent_link_testing.host_program.launcher`: as the child of a host's program),
        then a new interpreter.
    """
    if revision not in ("handshake", "stateless", "auto"):
        raise ValueError(f"revision must be handshake, stateless or auto, not {revision!r}")
    full = server_env(env)
    if launcher:
        command = [*launcher, sys.executable, "-m", "agent_link_core", *args]
    else:
        command = forked_processes.shared().command(args, full)
    params = StdioServerParameters(command=command[0], args=command[1:], env=full)
    # errlog named now: the SDK's default is the sys.stderr of when it was imported, which may
    # be a click CliRunner's capture that no longer has a file descriptor
    async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
        refused = False
        if revision == "handshake":
            init: Any = await session.initialize()
        else:
            try:
                init = await session.discover()
            except MCPError as exc:
                if revision == "stateless" or exc.code != METHOD_NOT_FOUND:
                    raise
                refused = True
                init = await session.initialize()
        yield AgentLinkClient(session, init, refused)


class RawMcpClient:
    """A hand-written JSON-RPC client on ``agent-link mcp``'s stdio, for bytes the SDK client
    cannot send (a lone surrogate escape, invalid UTF-8, malformed JSON-RPC).

    ``null_answers`` collects the error answers that carry no id (a line whose id could not be
    read), in the order read.
    """

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.null_answers: list[dict[str, Any]] = []

    async def send(self, raw: bytes) -> None:
        """Write ``raw`` (one line, without its newline) to the server's stdin."""
        assert b"\n" not in raw
        assert self.process.stdin is not None
        await self.process.stdin.send(raw + b"\n")

    async def responses(self, wanted: set[Any], timeout_s: float = 60.0) -> dict[Any, dict[str, Any]]:
        """Read until every id in ``wanted`` is answered; returns ``{id: answer}`` for every
        answer read. Raises TimeoutError (failing the test) after ``timeout_s`` seconds."""
        seen: dict[Any, dict[str, Any]] = {}
        assert self.process.stdout is not None
        with anyio.fail_after(timeout_s):
            while not wanted <= set(seen):
                while b"\n" not in self.buffer:
                    self.buffer += await self.process.stdout.receive()
                line, self.buffer = self.buffer.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") is None and "error" in msg:
                    self.null_answers.append(msg)
                elif "id" in msg:
                    seen[msg["id"]] = msg
        return seen


@asynccontextmanager
async def raw_mcp_server(env: Mapping[str, str], protocol_version: str = "2025-06-18") -> AsyncIterator[RawMcpClient]:
    """Start ``agent-link mcp`` with ``env`` added to the environment, open the connection
    (``initialize`` under the id ``"init"`` at ``protocol_version``, then
    ``notifications/initialized``) and yield a :class:`RawMcpClient`. On exit its stdin is
    closed and the server awaited (killed after 10 s). The server is forked from the test
    process's zygote, as in :func:`agent_link_mcp`: the bytes written are those it reads."""
    full = server_env(env)
    process = await anyio.open_process(forked_processes.shared().command(["mcp"], full), env=full, stderr=None)
    try:
        client = RawMcpClient(process)
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"protocolVersion": protocol_version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
        await client.send(json.dumps(init).encode())
        answered = await client.responses({"init"})
        assert "result" in answered["init"], answered
        await client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield client
    finally:
        with anyio.move_on_after(10, shield=True):
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()
        if process.returncode is None:
            process.kill()
            with anyio.move_on_after(5, shield=True):
                await process.wait()
        await process.aclose()


def exchange_lines(command: Sequence[str], script: bytes, wanted: int, *, env: Mapping[str, str],
                   cwd: str | os.PathLike[str] | None = None, bound_s: float = 120.0) -> list[dict[str, Any]]:
    """Start an MCP server (``command``, e.g. ``[path/to/agent-link, "mcp"]``) with the whole
    environment ``env``, write ``script`` (newline-ended JSON-RPC lines) to its stdin, read
    until ``wanted`` answers (lines with an ``id``; notifications are passed over) came, then
    close stdin and wait for the exit (killed after ``bound_s``
    seconds).

    :returns: the answers in the order read (ids kept).
    :raises AssertionError: when the server's stdout ends first (with the end of its stderr).
    """
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(script)
            proc.stdin.flush()
            answers: list[dict[str, Any]] = []
            while len(answers) < wanted:
                line = proc.stdout.readline()
                if not line:
                    errors.seek(0)
                    raise AssertionError(errors.read().decode("utf-8", "replace")[-3000:])
                message = json.loads(line)
                if "id" in message:
                    answers.append(message)
            proc.stdin.close()
            proc.wait(bound_s)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(bound_s)
            proc.stdout.close()
    return answers
