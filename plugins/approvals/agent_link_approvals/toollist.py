"""The MCP tools an installation offers, with the annotations hosts decide approvals by.

:func:`list_running_tools` asks a real ``agent-link mcp`` started in a scratch HOME and state
directory, with every ``CLAUDE_*``, ``CODEX_*`` and ``AGENT_LINK_*`` variable of the caller
removed, so neither the user's state nor a disabled-plugin list changes the answer: the tool
list is what a host that starts agent-link would see. :func:`tools_of_app` reads the same
facts from a running process's own tool registry (cheap; health uses it).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

#: Tools that change who holds a role or who may override a session's settings, and
#: ``agent_link_tools``, which calls any tool a host's list leaves out (these included). They
#: are never auto-approved by ``apply`` (not even with ``--all``): an agent that could call
#: them unasked could hand itself a role or the right to switch another session's model.
ROLE_ADMIN_TOOLS = ("set_agent_role", "clear_agent_role", "set_agent_override_policy", "agent_link_tools")
ROLE_ADMIN_REASON = (
    "they change who holds a role and who may change another session's model, effort or folder "
    "(agent_link_tools can call any tool, these included); keep them asking so that only you decide"
)

_STRIPPED_PREFIXES = ("CLAUDE_", "CODEX_", "AGENT_LINK_")
LIST_TIMEOUT_S = 60.0


class ToolListError(RuntimeError):
    """``agent-link mcp`` could not be started or did not list its tools in time."""


@dataclass(frozen=True)
class ToolInfo:
    """One MCP tool and its MCP annotations (``None`` = the hint is absent).

    :param name: the tool name as ``tools/list`` gives it.
    :param read_only: ``annotations.readOnlyHint``.
    :param destructive: ``annotations.destructiveHint``.
    :param open_world: ``annotations.openWorldHint``.
    """

    name: str
    read_only: bool | None
    destructive: bool | None
    open_world: bool | None

    @property
    def is_read_only(self) -> bool:
        """True only for ``readOnlyHint: true`` (an absent hint counts as side-effecting)."""
        return self.read_only is True

    @property
    def role_admin(self) -> bool:
        """One of :data:`ROLE_ADMIN_TOOLS`."""
        return self.name in ROLE_ADMIN_TOOLS

    def to_dict(self) -> dict[str, Any]:
        """``{name, readOnlyHint, destructiveHint, openWorldHint}``."""
        return {"name": self.name, "readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "openWorldHint": self.open_world}


def scratch_env(host: str, scratch: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the listing server: ``base`` (default ``os.environ``) without
    ``CLAUDE_*``, ``CODEX_*``, ``AGENT_LINK_*``, with HOME, XDG_CACHE_HOME, the state dir,
    CODEX_HOME and CLAUDE_CONFIG_DIR inside ``scratch``, ``AGENT_LINK_HOST=host``, Codex autostart and the
    Claude channel off (listing tools must start nothing)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update(
        HOME=os.path.join(scratch, "home"),
        # its caches too: nothing of this throwaway server (its state dir in the record of
        # state dirs health reads) is left in the user's
        XDG_CACHE_HOME=os.path.join(scratch, "cache"),
        AGENT_LINK_STATE_DIR=os.path.join(scratch, "state"),
        CODEX_HOME=os.path.join(scratch, "codex"),
        CLAUDE_CONFIG_DIR=os.path.join(scratch, "claude"),
        AGENT_LINK_HOST=host,
        AGENT_LINK_CODEX_AUTOSTART="0",
        AGENT_LINK_DISABLE_CHANNEL="1",
    )
    return env


def list_running_tools(host: str, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolInfo]:
    """Start ``agent-link mcp`` (this interpreter's install) in a scratch directory, run the
    MCP handshake and ``tools/list``, stop it; returns the tools sorted by name.

    :param host: ``codex`` or ``claude`` (``AGENT_LINK_HOST`` of the listing server).
    :param timeout_s: bound for start + handshake + listing, in seconds.
    :raises ToolListError: the server failed or did not answer in time (message includes the
        tail of its stderr).
    """
    import anyio

    scratch = tempfile.mkdtemp(prefix="agent-link-approvals-")
    try:
        for sub in ("home", "state", "codex", "claude"):
            os.makedirs(os.path.join(scratch, sub), mode=0o700, exist_ok=True)
        log_path = os.path.join(scratch, "server.stderr")
        try:
            with open(log_path, "w", encoding="utf-8") as errlog:
                return anyio.run(_list, host, scratch, errlog, timeout_s)
        except Exception as exc:
            tail = _tail(log_path)
            raise ToolListError(f"`agent-link mcp` did not list its tools ({type(exc).__name__}: {exc})"
                                + (f"; its stderr ends: {tail}" if tail else "")) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _list(host: str, scratch: str, errlog: Any, timeout_s: float) -> list[ToolInfo]:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "agent_link_core", "mcp"],
                                   env=scratch_env(host, scratch), cwd=scratch)
    from mcp import types

    tools: list[ToolInfo] = []
    with anyio.fail_after(timeout_s):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            cursor: str | None = None
            while True:
                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                for tool in page.tools:
                    a = tool.annotations
                    tools.append(ToolInfo(tool.name, a.read_only_hint if a else None,
                                          a.destructive_hint if a else None, a.open_world_hint if a else None))
                cursor = page.next_cursor
                if not cursor:
                    break
    return sorted(tools, key=lambda t: t.name)


def _tail(path: str, limit: int = 600) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return " ".join(fh.read()[-limit:].split())
    except OSError:
        return ""


def tools_of_app(app: App, host: str | None = None) -> list[ToolInfo]:
    """The tools registered in ``app``, with the annotations ``agent-link mcp`` declares for
    them (:func:`agent_link_core.server.tool_definition`).

    :param host: list only what a server that ``host`` started offers (``Hooks.listed_tools``:
        with the profiles plugin, a host's default tool profile unless ``AGENT_LINK_TOOLS`` is set).
    """
    from agent_link_core.server import tool_definition

    registered = app.hooks.tools() if host is None else app.hooks.listed_tools(host)
    tools = []
    for spec in registered.values():
        a = tool_definition(spec).annotations
        tools.append(ToolInfo(spec.name, a.read_only_hint if a else None, a.destructive_hint if a else None,
                              a.open_world_hint if a else None))
    return sorted(tools, key=lambda t: t.name)
