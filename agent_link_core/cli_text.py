"""What ``agent-link`` says to people: errors in the CLI's words (``--reply-by`` for ``replyBy``,
``agent-link inbox`` for ``read_agent_link_inbox``), mail made safe for a terminal."""

from __future__ import annotations

import functools
import os

from agent_link_core import discovery
from agent_link_core.addresses import is_address
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.visible import visible

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Tool argument -> CLI argument where the core's tools and commands name one differently (a command's parameters name
# theirs: cli_run.declared_names, passed as ``names``; without either a path reads ``--path``, a camelCase one ``--kebab-case``).
FIELD_NAMES = {"address": "TARGET", "to": "TARGET", "message": "TEXT", "messageId": "MESSAGE_ID"}
# MCP tool -> the command a person runs for the same thing, and the plugin that adds that command (None: the core's)
TOOL_COMMANDS = {
    "read_agent_link_inbox": ("inbox", None), "agent_link_mailbox_inspect": ("inbox --all", None), "list_agents": ("sessions", "listings"),
    "resolve_agent": ("find", "listings"), "message_agent": ("send", None), "reply_agent_link_message": ("reply", None),
    "wait_for_agent": ("wait", "waits"), "get_agent_link_message_status": ("status", None), "agent_link_health": ("health", None),
}


def _field(path: str, names: dict[str, str]) -> str:
    """The CLI's name of an error's path: ``names`` of it or of its array (``paths.1``: ``PATH #2``),
    a variable's name (``env.X`` or ``X``), else ``--path`` (``--kebab-case`` of a camelCase one)."""
    if path.startswith("env."):
        return path[4:]
    if path.isupper() and path.replace("_", "").isalnum():
        return path
    if path in names:
        return names[path]
    array, _, index = path.rpartition(".")
    if index.isdigit() and array in names:
        return f"{names[array]} #{int(index) + 1}"
    import re  # here and below: only a command that fails words an error

    return "--" + re.sub(r"(?<=[a-z0-9])[A-Z]", lambda m: "-" + m[0].lower(), path) if path else "arguments"


def cli_words(text: str, names: dict[str, str] | None = None) -> str:
    """``text`` with tool argument and tool names replaced by option and command names
    (``names``: the command's own ``{tool argument: CLI option or ARGUMENT}``: cli_run.declared_names, over the core's)."""
    import re

    names = {**FIELD_NAMES, **(names or {})}
    for tool, (cmd, plugin) in TOOL_COMMANDS.items():
        if tool in text:  # a plugin's command named where it exists, else with the plugin that adds it
            loaded = plugin is None or plugin in _loaded_plugins()
            text = text.replace(tool, f"`agent-link {cmd}`" + ("" if loaded else f" (with the {plugin} plugin, which is not loaded)"))
    return re.sub(r"(?<![\w`-])([a-z]+[A-Z][A-Za-z]*)\b", lambda m: names.get(m.group(1), m.group(1)), text)


def _loaded_plugins() -> set[str]:
    """The installed plugins that ``AGENT_LINK_DISABLE_PLUGINS`` / ``AGENT_LINK_LOAD_PLUGINS`` leave on (a failure's words only)."""
    from agent_link_core.plugins import ENTRY_POINT_GROUP

    blocked, only = discovery.chosen(os.environ)
    return {ep.name for ep in discovery.entry_points(ENTRY_POINT_GROUP) if ep.name not in blocked and (only is None or ep.name in only)}


def error_line(exc: AgentLinkError, command: str | None = None, command_path: str | None = None,
               names: dict[str, str] | None = None) -> str:
    """One line for stderr: what went wrong, in CLI terms, then what to do.

    :param command: the command's own name (``send``).
    :param command_path: the words after ``agent-link`` that run it (``config set``), for the help pointer; defaults to ``command``.
    :param names: the command's own ``{tool argument: CLI option or ARGUMENT}`` (``projectRoot``, ``paths.0``).
    """
    words = functools.partial(cli_words, names=names)
    errors = exc.details.get("errors") if exc.code == "invalid_arguments" else None
    if not errors or (exc.message and all(str(e.get("expected", "")) in exc.message for e in errors)):
        # (bad arguments whose message says what each should be, as a setting's: no list, no --help)
        return _one_line(f"agent-link: {words(exc.message)}" + (f" {words(exc.hint)}" if exc.hint else ""))
    table = {**FIELD_NAMES, **(names or {})}
    fields = [_field(e.get("path") or "", table) for e in errors]
    # each error's own example (a rule such as ``format`` is shared by timestamps and cursors)
    listed = "; ".join(f"{field}: expected {words(str(e.get('expected', '')))}" + (f" (e.g. {e['example']})" if e.get("example") else "")
                       for field, e in zip(fields, errors)) + "."
    said = words(exc.message) if exc.message and not exc.message.startswith("Invalid arguments") else ""
    if said and all(field in said for field in fields):  # named each field already: no list (details.errors keeps it)
        own_hint = exc.hint if exc.hint != invalid_arguments(errors).hint else None  # not the list again
        line = said + (f" {words(own_hint)}" if own_hint else "")
    else:
        line = f"{said} {listed}" if said else listed
    where = command_path or command  # said as click says a usage error (cli_run.usage_line): one form for both
    return _one_line(f"agent-link {where}: {line} (see 'agent-link {where} --help')" if where else f"agent-link: {line}")


def _one_line(text: str) -> str:
    """``text`` with its line breaks as spaces (a multi-line report of SQLite's or a plugin's, a value given with one)."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def address_error(value: str, option: str) -> AgentLinkError | None:
    """Why ``value`` is not an address, said for ``option`` (None when it is one)."""
    if is_address(value):
        return None
    head, sep, rest = value.partition(":")
    if sep and head != head.lower() and is_address(f"{head.lower()}:{rest}"):
        return invalid_arguments([{"path": option, "rule": "lowercase_harness",
                                   "expected": f"{head.lower()}:{rest} (harness names are lower case)"}])
    return invalid_arguments([{"path": option, "rule": "pattern", "expected": (
        "an address <harness>:<id>: a lower-case harness name (a-z 0-9 -, starting with a letter, at most 32) "
        "and an id of at most 128 of A-Z a-z 0-9 _ . -")}])


def printable(value: Any) -> str:
    """``value`` on one line: every control, format or bidi character (line breaks and tabs too) as a visible escape
    (a table cell, a message's header field: a peer's text cannot forge the lines under it)."""
    return visible("" if value is None else str(value), keep="")


def terminal_safe(text: str | None) -> str:
    """``text`` for a terminal: line breaks and tabs kept, every other control, format or bidi
    character a visible escape (a peer's text cannot move the cursor or disguise itself)."""
    return visible(text or "")


def late(view: dict[str, Any], status: str) -> str:
    """``status``, `` (late)`` added when ``view``'s resolution is marked late (docs/behaviour.md §8)."""
    return f"{status} (late)" if (view.get("resolution") or {}).get("late") else status


def message_lines(view: dict[str, Any], body: str | None) -> list[str]:
    """A message for people: who, when, where it stands, then its body (terminal-safe). ``view``: a message view
    (``Mailbox.to_view``); ``body``: the stored body, or None when it is not shown."""
    # an fyi message has no status (nothing is expected); delivery is a fact of its own
    status = late(view, view.get("status") or ("none, nothing is expected (fyi)" if view.get("anticipation") == "fyi" else "-"))
    lines = [
        f"message {view.get('id')}",
        f"  from:    {printable(view.get('from'))}",
        f"  to:      {printable(view.get('to'))}",
        f"  sent:    {view.get('sentAt')}",
        f"  delivery: {view.get('delivery')}",
        f"  status:  {status}",
        f"  expects: {view.get('anticipation')}" + (f", by {view['replyBy']}" if view.get("replyBy") else ""),
    ]
    if view.get("inReplyTo"):
        lines.append(f"  answers: {view['inReplyTo']}")
    sender = [printable(view[k]) for k in ("senderLabel", "senderProject") if view.get(k)]
    if sender:
        lines.insert(2, f"  sender:  {' of '.join(sender)}")
    if view.get("correlationId"):
        lines.append(f"  thread:  {printable(view['correlationId'])}")
    if body is not None:
        lines += ["", *("  " + line for line in terminal_safe(body).split("\n"))]
    lines.append("")
    return lines
