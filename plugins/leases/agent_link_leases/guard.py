"""The edit guard: refuse a ``PreToolUse`` edit of a path another session holds exclusively
(Claude Code's and Codex's hooks, and opencode's through agent-link's opencode plugin, whose
tool calls :func:`agent_link_leases.hook.from_opencode` reads in these terms; standard library
and the core's fast-path modules only, like the prompt hook).

:func:`check` takes the hook's stdin object and the calling session's address and returns
the hook's JSON answer: a ``deny`` naming the holder, why and until when, and how to ask for
the path; or None (print nothing) when the call may go ahead. Only edit and write tools are
checked (reads are never blocked): Claude Code's ``Edit``, ``MultiEdit``, ``Write`` and
``NotebookEdit``, Codex's ``apply_patch`` (every file the patch names, both names of a move)
and both hosts' shell commands (``Bash``: what :func:`agent_link_leases.writes.shell_targets`
sees them write in the command's text; what a program writes on its own, ``python x.py``, or a
target behind a command substitution or an unknown variable is not seen and passes). Shared
leases and the caller's own leases let it pass.
Whatever cannot be read (no database yet, no ``leases`` table, a malformed payload) lets the
call pass: the guard refuses only on a lease it has found.
"""

from __future__ import annotations

import os
import sqlite3

from agent_link_leases.patterns import PatternError, escape, overlap, parse

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.store import Store

#: Claude Code's editing tools and the ``tool_input`` keys naming the file each one writes.
EDIT_TOOLS: dict[str, tuple[str, ...]] = {
    "Edit": ("file_path",), "MultiEdit": ("file_path",), "Write": ("file_path",), "NotebookEdit": ("notebook_path",),
}
#: Codex's tools whose ``tool_input.command`` is a patch or a shell command line (Codex 0.171
#: names its exec tools ``Bash`` in hook payloads; Claude Code's ``Bash`` has the same shape
#: and is checked the same way)
PATCH_TOOLS = frozenset({"apply_patch"})
SHELL_TOOLS = frozenset({"Bash"})


def edit_targets(payload: dict[str, Any]) -> list[str]:
    """The absolute, resolved paths a tool call writes (relative ones read against ``cwd``);
    [] for a tool that writes nothing known, or a malformed call."""
    tool = str(payload.get("tool_name"))
    given = payload.get("tool_input")
    if not isinstance(given, dict):
        return []
    given_cwd = payload.get("cwd")
    cwd = given_cwd if isinstance(given_cwd, str) else os.getcwd()
    found: list[str] = []
    if tool in PATCH_TOOLS or tool in SHELL_TOOLS:
        command = given.get("command")
        if isinstance(command, str) and "\0" not in command:
            from agent_link_leases.writes import patch_targets, shell_targets  # shlex: only for these tools

            found = patch_targets(command, cwd) if tool in PATCH_TOOLS else shell_targets(command, cwd)
    for key in EDIT_TOOLS.get(tool, ()):
        value = given.get(key)
        if isinstance(value, str) and value and "\0" not in value:
            found.append(os.path.join(cwd, value))
    return list(dict.fromkeys(os.path.realpath(p) for p in found))


def _relative(path: str, root: str, fold: bool) -> str | None:
    if fold:
        path, root = path.lower(), root.lower()
    if path == root:
        return "."
    return path[len(root) + 1:] if path.startswith(root.rstrip("/") + "/") else None


def holders_of(conn: sqlite3.Connection, path: str, caller: str, now: int) -> list[sqlite3.Row]:
    """Others' active exclusive leases overlapping ``path`` (absolute, resolved), oldest first;
    an existing directory counts with what is below it (``rm -r dir``, ``mv dir x``).

    Reads only the leases of the roots holding ``path`` whose anchor (literal prefix, see
    :func:`agent_link_leases.table.anchor`) is a prefix of ``path`` (for a directory, also
    those below it): one or two indexed reads per root.

    :param now: epoch ms.
    :raises sqlite3.Error: as the query does (no ``leases`` table yet, a lock).
    """
    out = []
    roots = conn.execute("SELECT DISTINCT root, fold FROM leases").fetchall()
    for root, fold in roots:
        rel = _relative(path, root, bool(fold))
        if rel is None:
            continue
        parts = [] if rel == "." else rel.split("/")
        prefixes = ["/".join(parts[:k]) for k in range(len(parts) + 1)]
        others = "exclusive = 1 AND holder != ? AND expires_at > ?"
        rows = conn.execute(
            f"SELECT * FROM leases WHERE root = ? AND anchor IN ({', '.join('?' for _ in prefixes)}) AND {others} ORDER BY id",
            (root, *prefixes, caller, now)).fetchall()
        below = os.path.isdir(path)
        if below:
            mine = "/".join(parts)
            under = ("anchor > ? AND anchor < ?", (mine + "/", mine + "0")) if mine else ("anchor != ''", ())  # "0" follows "/"
            rows += conn.execute(f"SELECT * FROM leases WHERE root = ? AND {under[0]} AND {others} ORDER BY id",
                                 (root, *under[1], caller, now)).fetchall()
        if not rows:
            continue
        target = parse("/".join(escape(n) for n in parts) or ".", bool(fold), below=below)
        for row in rows:
            try:
                if overlap(target, parse(row["pattern"], bool(row["fold"]), bool(row["below"]))):
                    out.append(row)
            except PatternError:
                continue  # a stored pattern is always well formed; a hand edit is skipped, not fatal
    return sorted(out, key=lambda r: int(r["id"]))


def deny_reason(path: str, rows: list[sqlite3.Row]) -> str:
    """The text shown to the model: who holds ``path``, why, until when, and what to do."""
    from agent_link_core.mailbox import iso  # the deny path only: an allowed call does not load the mailbox
    from agent_link_core.visible import visible  # a holder's reason, a file's name: their control and bidi characters as escapes

    def shown(text: str) -> str:
        return visible(text, keep="")

    held = "; ".join(
        f"{shown(r['holder'])} holds {shown(r['pattern'])} (under {shown(r['root'])}) until {iso(r['expires_at'])}"
        + (f" because: {shown(r['reason'])}" if r["reason"] else "") for r in rows)
    first = shown(rows[0]["holder"])
    path = shown(path)
    return (f"agent-link: {path} is leased exclusively by another session: {held}. Do not edit it now: ask the holder "
            f"to release it (message_agent to {first}), or work on other files; list_leases shows every lease. If the holder's "
            f"session has ended, lease_paths for the path ends its leases.")


def check(payload: dict[str, Any], caller: str, store: Store | None, now: int) -> dict[str, Any] | None:
    """The ``PreToolUse`` answer for one tool call.

    :param payload: the hook's stdin object (``tool_name``, ``tool_input``, ``cwd``).
    :param caller: the calling session's address (its own leases never stop it).
    :param store: the state database, or None when none exists yet.
    :param now: epoch ms.
    :returns: ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
        "deny", "permissionDecisionReason": text}}``, or None to let the call go ahead.
    """
    if store is None:
        return None
    for path in edit_targets(payload):
        try:
            rows = holders_of(store.conn, path, caller, now)
        except sqlite3.Error:
            return None  # no leases table yet, or the database is busy: never block on doubt
        if rows:
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": deny_reason(path, rows)}}
    return None
