"""What opencode proves about a caller of agent-link's MCP tools (``Caller.evidence``; the rule
is :mod:`agent_link_core.identity`).

An MCP server started by opencode is told nothing about the calling session: its environment
holds only ``OPENCODE=1``, ``AGENT=1`` and ``OPENCODE_PID``, a ``tools/call`` carries no session
in ``_meta``, and one server process serves every session of that opencode process. So
agent-link installs an opencode plugin (``host_plugin/agent-link.js``) whose
``tool.execute.before`` hook (opencode runs it for MCP tools too, with the same ``args`` object
it then sends) adds :data:`CALLER_ARGUMENT` = ``{"sessionID", "callID", "server"}`` to every call
of agent-link's tools. The core moves that argument into the meta ``identify_caller`` sees
(``Harness.caller_arguments``).

The argument only names a session. opencode proves it when all of these hold:

* a process in this server's lineage (its parent, for a server opencode started) runs
  opencode's program and listens on the TCP port of ``server``, so ``server`` is that very
  opencode process and not a look-alike;
* that server's record of ``sessionID`` (``GET /session/{id}/message``, the newest messages)
  holds a tool part with ``callID`` that is pending or running: the session is making this
  call right now.

The server is asked with the password in that opencode process's own environment
(``OPENCODE_SERVER_PASSWORD``, :func:`agent_link_opencode.discover.credentials`), else the
configured one. Not proved: anything against a process of the same user that drives the opencode
process itself (its HTTP API can start a turn in any of its sessions).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from agent_link_hostkit.procs import executable, lineage

#: the tool-call argument the opencode plugin adds (``Harness.caller_arguments``)
CALLER_ARGUMENT = "_agentLinkCaller"
#: opencode's native program (``opencode``, or ``opencode.exe`` as npm's ``opencode-ai`` links it)
PROGRAM_RE = re.compile(r"(?:^|[/\\])opencode(?:\.exe)?$")
LINEAGE_DEPTH = 4
#: how many of a session's newest messages are searched for the running call
NEWEST_MESSAGES = 6
ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}\Z")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def claimed(meta: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(session id, call id, server base URL)`` named by :data:`CALLER_ARGUMENT`, or None when
    absent or malformed."""
    value = meta.get(CALLER_ARGUMENT)
    if not isinstance(value, Mapping):
        return None
    sid, call, server = value.get("sessionID"), value.get("callID"), value.get("server")
    if not (isinstance(sid, str) and ID_RE.match(sid) and isinstance(call, str) and ID_RE.match(call) and isinstance(server, str)):
        return None
    parts = urlsplit(server.strip())
    if parts.scheme != "http" or parts.hostname not in LOCAL_HOSTS or parts.port is None:
        return None
    return sid, call, f"http://{parts.netloc}"


def listens_on(pid: int, port: int) -> bool:
    """True when ``pid`` has a listening TCP socket on ``port`` (False when it cannot be read)."""
    import psutil

    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections)


def serving_ancestor(port: int) -> int | None:
    """The process in this process's lineage that runs opencode's program and listens on
    ``port``, or None."""
    for pid in lineage(os.getppid(), LINEAGE_DEPTH):
        exe = executable(pid)
        if exe is not None and PROGRAM_RE.search(exe) and listens_on(pid, port):
            return pid
    return None


def running_call(messages: Any, call_id: str) -> bool:
    """True when a ``GET /session/{id}/message`` answer holds a tool part ``call_id`` that is
    pending or running."""
    for entry in messages if isinstance(messages, list) else ():
        parts = entry.get("parts") if isinstance(entry, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict) or part.get("type") != "tool" or part.get("callID") != call_id:
                continue
            state = part.get("state")
            if isinstance(state, dict) and state.get("status") in ("pending", "running"):
                return True
    return False


def evidence(meta: Mapping[str, Any], fetch: Callable[[str, str, int], Any]) -> str | None:
    """The sentence for ``Caller.evidence`` when opencode proves the session named in ``meta``
    (module docstring), else None.

    :param fetch: ``(base_url, path, pid of the opencode process listening there) -> decoded
        JSON`` (blocking, bounded); any exception it raises proves nothing.
    """
    named = claimed(meta)
    if named is None:
        return None
    sid, call, server = named
    port = urlsplit(server).port
    pid = serving_ancestor(port) if port is not None else None
    if pid is None:
        return None
    try:
        messages = fetch(server, f"/session/{sid}/message?limit={NEWEST_MESSAGES}", pid)
    except Exception:  # an unreadable server proves nothing
        return None
    if not running_call(messages, call):
        return None
    return (f"pid {pid}, an ancestor of this process, is opencode's program listening on {server}, "
            f"and its session {sid} is running tool call {call}")
