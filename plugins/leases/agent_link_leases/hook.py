"""``agent-link hook leases PreToolUse``, ``agent-link hook leases CodexPreToolUse`` and
``agent-link hook leases OpencodeToolBefore``: the edit guard as a Claude Code and a Codex
``PreToolUse`` hook, and for opencode's ``tool.execute.before`` plugin hook.

Registered as the prompt-hook adapter named ``leases``, so the core's hook fast path runs it
without loading plugins (and never once the plugin is disabled or removed). The Claude Code
plugin declares the first (``hooks/hooks.json``, matcher ``Edit|MultiEdit|Write|NotebookEdit|Bash``),
the Codex plugin the second (``hooks/codex-hooks.json``, matcher ``apply_patch|Bash``). Both
hosts send the same payload shape (``hook_event_name`` ``PreToolUse``); the command line's
event names the host, so the caller is ``claude:<session_id>`` or ``codex:<session_id>`` (a
Codex hook's ``session_id`` is the thread id). agent-link's opencode plugin
(``plugins/opencode/agent_link_opencode/host_plugin/agent-link.js``) sends the same shape with
opencode's own tool names and arguments (``edit``/``write`` ``filePath``, ``apply_patch``
``patchText``, ``bash`` ``command`` and ``workdir``; opencode 1.18.33), which
:func:`from_opencode` reads as the guard's; the caller is ``opencode:<session id>``. See
:mod:`agent_link_leases.guard` for the decision. Standard library and the core's fast-path
modules only.
"""

from __future__ import annotations

import os

from agent_link_core.addresses import is_address
from agent_link_core.hook import HOOK_BUSY_TIMEOUT_MS
from agent_link_core.store import Store, now_ms

from agent_link_leases.guard import check

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.hook import HookContext

#: the event on the command line -> the harness whose session the payload's ``session_id`` names
EVENTS = {"PreToolUse": "claude", "CodexPreToolUse": "codex", "OpencodeToolBefore": "opencode"}
PAYLOAD_EVENT = "PreToolUse"
#: opencode's writing tools -> the guard's tool of the same kind
OPENCODE_TOOLS = {"edit": "Write", "write": "Write", "apply_patch": "apply_patch", "bash": "Bash"}


def from_opencode(payload: dict[str, Any]) -> dict[str, Any]:
    """The guard's payload for an opencode tool call: ``tool_name`` one of
    :data:`OPENCODE_TOOLS`, ``tool_input`` the call's arguments, ``cwd`` the session's
    directory. ``edit``/``write`` write ``filePath``; ``apply_patch`` every file its
    ``patchText`` names; ``bash`` what its ``command`` writes, run in ``workdir`` (relative
    to ``cwd``) when given. Another tool, or arguments of another shape, give a payload the
    guard passes (its ``tool_name`` is ``None``)."""
    tool = OPENCODE_TOOLS.get(str(payload.get("tool_name")))
    given = payload.get("tool_input")
    args: dict[str, Any] = given if isinstance(given, dict) else {}
    cwd = payload.get("cwd")
    tool_input: dict[str, Any] = {}
    if tool == "Write":
        tool_input = {"file_path": args.get("filePath")}
    elif tool == "apply_patch":
        tool_input = {"command": args.get("patchText")}
    elif tool == "Bash":
        tool_input = {"command": args.get("command")}
        workdir = args.get("workdir")
        if isinstance(workdir, str) and workdir and "\0" not in workdir and isinstance(cwd, str):
            cwd = os.path.join(cwd, workdir)
    return {"tool_name": tool, "tool_input": tool_input, "cwd": cwd}


def handle(event: str, payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """The hook's JSON answer: a ``deny`` (see :func:`agent_link_leases.guard.check`), or None.

    :param event: the event on the command line (a key of :data:`EVENTS`; others are ignored),
        and a payload whose ``hook_event_name`` is not ``PreToolUse`` is ignored.
    :param payload: the host's hook stdin (``session_id``, ``tool_name``, ``tool_input``, ``cwd``;
        opencode's tool names and arguments for ``OpencodeToolBefore``, see :func:`from_opencode`).
    :param ctx: the core's hook context (its settings: where the database is).
    """
    named = payload.get("hook_event_name")
    harness = EVENTS.get(event)
    if harness is None or (named is not None and named != PAYLOAD_EVENT):
        return None
    session_id = payload.get("session_id")
    address = f"{harness}:{session_id}" if isinstance(session_id, str) else ""
    if not is_address(address):
        return None
    if harness == "opencode":
        payload = from_opencode(payload)
    wait_ms = min(HOOK_BUSY_TIMEOUT_MS, int(ctx.config.get("AGENT_LINK_BUSY_TIMEOUT_MS")))
    store = Store.open_existing(ctx.config.db_path, busy_timeout_ms=wait_ms)
    try:
        return check(payload, address, store, now_ms())
    finally:
        if store is not None:
            store.close()
