"""Permission rules for agent-link's tools in opencode's config.

Facts (observed with the real opencode 1.18.33, ``plugins/approvals/tests/test_approvals_opencode_realhost.py``):

* an MCP tool is named ``<server>_<tool>`` (characters outside ``A-Z a-z 0-9 _ -`` become
  ``_``); ``agent-link install opencode`` names the server ``agent-link``, so
  ``agent-link_message_agent``;
* the config's ``permission`` object maps tool names or wildcard patterns (``*`` any text) to
  ``"allow"``, ``"ask"`` or ``"deny"``; of the keys that match a tool the **last** one in the
  object decides (``{"*": "ask", "agent-link_list_agents": "allow"}`` runs the tool unasked,
  ``{"agent-link_list_agents": "allow", "*": "ask"}`` asks); a value may also be an object of
  patterns over the call's input, which for an MCP tool is ``*``;
* with no matching key an MCP tool runs unasked; ``ask`` holds the call (``GET /permission``
  lists the request) until someone answers it;
* an agent (``agent.<name>`` of the merged config, markdown agents included: see
  :mod:`agent_link_approvals.opencode_layers`) gets the rules of its own ``permission``
  **after** the top-level ones (opencode's ``packages/opencode/src/agent/agent.ts``:
  ``merge(defaults, user, agent.permission)``, evaluated last match first): a matching key there
  decides for that agent whatever the top level says; with none, the agent follows the top level.

The tables are judged as opencode merges them from every layer, each deciding key named with the
layer it came from. A tool a wildcard key makes ask or deny is "missing" when ``apply`` can fix
it: the exact name with ``"allow"`` added at the end of that table in the one file ``apply``
writes (``permission``, or ``agent.<name>.permission`` where that file has it) must then decide,
which it does unless a later layer brings a matching key of its own (the merge puts a later
layer's new keys after it). Else it is held back, naming that layer. A tool whose exact name a
table already has (any value, any place, any layer) is held back too: a JSON object has one copy
of a key, and moving or changing it would change what the user wrote; so is a table that is one
action for every tool.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_link_approvals.claude import _indent, strict_json
from agent_link_approvals.files import ConfigFileError, decode_utf8
from agent_link_approvals.opencode_layers import Layer, Merged, merge
from agent_link_approvals.toollist import ROLE_ADMIN_REASON, ToolInfo

#: the MCP server name ``agent-link install opencode`` writes (agent_link_opencode.install.SERVER_NAME)
SERVER = "agent-link"
ACTIONS = ("allow", "ask", "deny")


def tool_key(server: str, tool: str) -> str:
    """opencode's name of MCP tool ``tool`` of server ``server``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", server) + "_" + re.sub(r"[^A-Za-z0-9_-]", "_", tool)


def _matches(pattern: str, name: str) -> bool:
    """opencode's wildcard match: ``*`` any text, ``?`` one character, the rest literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None


def decide(permission: Any, name: str) -> tuple[str, str | None]:
    """``(action, deciding key)`` for tool ``name`` under a ``permission`` value: ``"none"``
    (no key matches: it runs unasked) or the last matching key's action; a malformed value
    counts as ``ask`` (opencode may refuse the config)."""
    if isinstance(permission, str):
        return (permission if permission in ACTIONS else "ask"), "permission"
    if not isinstance(permission, dict):
        return "none", None
    found: tuple[str, str | None] = ("none", None)
    for key, value in permission.items():
        if not _matches(key, name):
            continue
        if isinstance(value, dict):  # patterns over the call's input: an MCP tool's is "*"
            inner = [v for k, v in value.items() if _matches(k, "*")]
            if not inner:
                continue
            value = inner[-1]
        found = (value if value in ACTIONS else "ask"), key
    return found


@dataclass
class OpencodeCheck:
    """The verdict for opencode's config (``--json`` form: :meth:`to_dict`): ``path`` is the file
    ``apply`` writes, ``layers`` the layers read (:class:`~agent_link_approvals.opencode_layers.Layer`)."""

    path: Path | None
    exists: bool
    required: list[str]
    layers: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: ``{"key", "decision", "by" (the deciding key), "from" (its layer), "why"}``; ``why``:
    #: ``named`` (the table names the tool itself), ``action`` (the table is one action) or
    #: ``layer`` (a key ``apply`` cannot outrank from the file it writes decides)
    held_back: list[dict[str, Any]] = field(default_factory=list)
    role_admin_allowed: list[str] = field(default_factory=list)
    #: per agent with a permission table of its own: ``{"agent", "missing": [key], "heldBack": [...]}``
    agents: list[dict[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every required tool runs unasked, for every agent."""
        return not self.missing and not self.held_back and not any(a["missing"] or a["heldBack"] for a in self.agents)

    def agent_missing(self) -> dict[str, list[str]]:
        """``{agent name: [tool key]}``: what ``apply`` adds to ``agent.<name>.permission``."""
        return {a["agent"]: list(a["missing"]) for a in self.agents if a["missing"]}

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"config": str(self.path) if self.path else None, "exists": self.exists, "server": SERVER,
                "complete": self.complete, "layers": self.layers, "required": self.required, "missing": self.missing,
                "heldBack": self.held_back, "agents": self.agents,
                "roleAdmin": {"allowed": self.role_admin_allowed, "why": ROLE_ADMIN_REASON}, "tools": self.tools}


def _source(merged: Merged, where: tuple[str, ...], table: Any, by: str | None) -> str | None:
    """The layer of the deciding key ``by`` of the table at ``where`` (its input pattern's, for a
    value that is an object of patterns)."""
    if by is None:
        return None
    if not isinstance(table, dict):
        return merged.source(*where)
    value = table.get(by)
    inner = [k for k in value if _matches(k, "*")] if isinstance(value, dict) else []
    return merged.source(*where, by, inner[-1]) if inner else merged.source(*where, by)


def agent_permissions(merged: Merged) -> dict[str, Any]:
    """``{agent name: its own permission value}`` of the merged config, disabled agents left out."""
    agents = merged.data.get("agent")
    return {name: entry["permission"] for name, entry in (agents.items() if isinstance(agents, dict) else ())
            if isinstance(entry, dict) and entry.get("disable") is not True and "permission" in entry}


def _tables(merged: Merged) -> list[tuple[str | None, tuple[str, ...], Any]]:
    """``(agent name or None for the top level, path, permission value)`` of every table."""
    return [(None, ("permission",), merged.data.get("permission")),
            *((name, ("agent", name, "permission"), table) for name, table in agent_permissions(merged).items())]


def _trial(layers: list[Layer], target: int | None, env: Mapping[str, str],
           wanted: dict[str | None, list[str]]) -> Merged | None:
    """The merged config once ``wanted`` (``{agent or None: [key]}``) is added with ``"allow"`` to
    the target layer (an agent's key only where that file has the agent's table); None without target."""
    if target is None:
        return None
    data = copy.deepcopy(layers[target].data or {})
    for agent, keys in wanted.items():
        if agent is None:
            table = data.setdefault("permission", {})
        else:
            entry = data.get("agent", {}).get(agent) if isinstance(data.get("agent"), dict) else None
            table = entry.get("permission") if isinstance(entry, dict) else None
        if isinstance(table, dict):
            table.update((key, "allow") for key in keys)
    # the same file can be two layers (``$OPENCODE_CONFIG`` naming a global file): opencode reads it twice
    trial = [dataclasses.replace(layer, data=data) if layer.path is not None and layer.source == layers[target].source
             and layer.scope != "agent" else layer for layer in layers]
    return merge(trial, env)


def check(layers: list[Layer], tools: Iterable[ToolInfo], all_tools: bool = False, *, target: int | None = None,
          env: Mapping[str, str] | None = None) -> OpencodeCheck:
    """Check the config opencode merges from ``layers`` for ``tools``.

    A tool a wildcard key makes ask or deny is ``missing`` when a key ``"<tool>": "allow"`` added
    to the layer ``layers[target]`` (the file ``apply`` writes) would make it run unasked, else
    held back naming the layer that still decides.

    :param all_tools: require every tool but the role-admin ones, not just the read-only ones.
    :param env: for ``OPENCODE_PERMISSION`` (default: none).
    """
    env = env or {}
    tools = list(tools)
    merged = merge(layers, env)
    required = sorted(tool_key(SERVER, t.name) for t in tools if not t.role_admin and (all_tools or t.is_read_only))
    where = layers[target] if target is not None else None
    result = OpencodeCheck(where.path if where else None, bool(where and where.data is not None), required,
                           [layer.to_dict() for layer in layers])
    entries: dict[str | None, dict[str, Any]] = {}
    wanted: dict[str | None, list[str]] = {}
    for agent, path, table in _tables(merged):
        entry = entries[agent] = {"agent": agent, "missing": [], "heldBack": []}
        for tool in tools:
            key = tool_key(SERVER, tool.name)
            action, by = decide(table, key)
            source = _source(merged, path, table, by)
            if agent is None:
                result.tools.append({"tool": tool.name, "key": key, "decision": action, "by": by, "from": source})
            elif action != "none":  # with no key of its own, an agent follows the top level
                next(r for r in result.tools if r["key"] == key).setdefault("agents", {})[agent] = action
            if tool.role_admin and action in (("allow", "none") if agent is None else ("allow",)):
                result.role_admin_allowed.append(key if agent is None else f"{key} (agent {agent})")
            if key not in required or action in ("allow", "none"):
                continue
            if not isinstance(table, dict) or key in table:  # the user's own choice: never moved or changed
                why = "named" if isinstance(table, dict) else "action"
                entry["heldBack"].append({"key": key, "decision": action, "by": by, "from": source, "why": why})
            else:
                wanted.setdefault(agent, []).append(key)
    _sort_wanted(_trial(layers, target, env, wanted), merged, wanted, entries)
    top = entries.pop(None)
    result.missing, result.held_back = top["missing"], top["heldBack"]
    result.agents = list(entries.values())
    return result


def _sort_wanted(trial: Merged | None, merged: Merged, wanted: dict[str | None, list[str]], entries: dict[str | None, dict[str, Any]]) -> None:
    """File each ``wanted`` key (of each agent, None: the top level) in its entry as ``missing`` when ``trial`` (the config
    with them added to the target layer; None: it cannot be written) lets the tool run, else ``heldBack`` naming the later
    layer that still decides."""
    view = trial if trial is not None else merged
    tables = {agent: (path, table) for agent, path, table in _tables(view)}
    for agent, keys in wanted.items():
        path, table = tables[agent]
        for key in keys:
            action, by = decide(table, key)
            if trial is not None and action in ("allow", "none"):
                entries[agent]["missing"].append(key)
            else:  # a key added to the target would not decide: a later layer's does
                entries[agent]["heldBack"].append({"key": key, "decision": action, "by": by,
                                                   "from": _source(view, path, table, by), "why": "layer"})


def parse(path: Path, raw: bytes | None) -> dict[str, Any]:
    """The object of ``raw`` (the bytes of ``path``; None or blank: empty) as plain JSON, the
    form ``apply`` rewrites.

    :raises ConfigFileError: ``malformed``: not UTF-8, not plain JSON (a config with comments
        or trailing commas, JSONC, is read by ``check`` but never rewritten), or not an object.
    """
    if raw is None:
        return {}
    text = decode_utf8(path, raw, bom=True)
    try:
        data = strict_json(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigFileError("malformed", f"{path} is not plain JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                                           "a config with comments is not rewritten") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigFileError("malformed", f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigFileError("malformed", f"{path} is not a JSON object")
    return data


def plan(path: Path, raw: bytes | None, keys: list[str], agent_keys: Mapping[str, list[str]] | None = None) -> tuple[str, str]:
    """``(old text, new text)``: ``keys`` added with ``"allow"`` at the end of ``permission``
    (created when absent) and ``agent_keys`` (``{agent name: [key]}``) at the end of
    ``agent.<name>.permission`` (which must exist), the rest of the config and its indentation kept.

    :raises ConfigFileError: ``malformed`` when a table to extend is not an object, or when the
        new text would not read back as intended.
    """
    old_text = raw.decode("utf-8") if raw is not None else ""
    bom = "\ufeff" if old_text.startswith("\ufeff") else ""  # kept: the file changes only where keys are added
    body = old_text[len(bom):]
    data = strict_json(body) if body.strip() else {}
    targets: list[tuple[list[str], list[str]]] = [(["permission"], keys)] if keys else []
    targets += [(["agent", name, "permission"], names) for name, names in (agent_keys or {}).items() if names]
    intended = json.loads(json.dumps(data))
    for where, names in targets:
        for doc in (data, intended):
            table = doc.setdefault("permission", {}) if where == ["permission"] else doc.get("agent", {}).get(where[1], {}).get("permission")
            if not isinstance(table, dict):
                raise ConfigFileError("malformed", f"{path}: {'.'.join(where)} is not a JSON object")
            table.update((key, "allow") for key in names)
    new_text = bom + json.dumps(data, indent=_indent(body), ensure_ascii=False) + "\n"
    again = strict_json(new_text[len(bom):])
    for where, names in targets:
        table = again["permission"] if where == ["permission"] else again["agent"][where[1]]["permission"]
        if any(decide(table, key)[0] != "allow" for key in names):
            again = None
            break
    if again != intended:
        raise ConfigFileError("malformed", f"{path}: the new config did not read back as intended; nothing was written")
    return old_text, new_text
