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
* an agent (``agent.<name>`` in the config, or a markdown file ``agent/<name>.md`` /
  ``agents/<name>.md`` / ``mode/<name>.md`` in the config's folder whose YAML front matter has
  ``permission``) gets the rules of its own ``permission`` **after** the top-level ones
  (opencode's ``packages/opencode/src/agent/agent.ts``: ``merge(defaults, user,
  agent.permission)``, evaluated last match first): a matching key there decides for that
  agent whatever the top level says; with none, the agent follows the top level. A markdown
  agent's table is merged over the config's ``agent.<name>.permission`` (same key: the file's
  value in the config's place; new keys after).

So a tool is "missing" when a wildcard key makes it ask or deny: ``apply`` adds the tool's exact
name with ``"allow"`` at the end of the table whose wildcard decides it (``permission``, or
``agent.<name>.permission`` for an agent's own wildcard). A tool whose exact name the user
already has in that table (whatever its value and place) is held back: a JSON object has one
copy of a key, and moving or changing it would change what the user wrote; so is a table that
is one action for every tool, and an agent whose deciding key is in a markdown file (``apply``
rewrites opencode.json only; the report names the file and the lines to add).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent_link_approvals.claude import _indent, strict_json
from agent_link_approvals.files import ConfigFileError, decode_utf8, read_bytes
from agent_link_approvals.toollist import ROLE_ADMIN_REASON, ToolInfo

#: the MCP server name ``agent-link install opencode`` writes (agent_link_opencode.install.SERVER_NAME)
SERVER = "agent-link"
ACTIONS = ("allow", "ask", "deny")


def config_path(env: Mapping[str, str]) -> Path:
    """opencode's global config file: ``$OPENCODE_CONFIG``, else
    ``$XDG_CONFIG_HOME/opencode/opencode.json`` (default ``~/.config``), as
    ``agent-link install opencode`` writes it."""
    if env.get("OPENCODE_CONFIG"):
        return Path(env["OPENCODE_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "opencode" / "opencode.json"


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
    """The verdict for one opencode config (``--json`` form: :meth:`to_dict`)."""

    path: Path
    exists: bool
    required: list[str]
    tools: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    held_back: list[dict[str, Any]] = field(default_factory=list)
    role_admin_allowed: list[str] = field(default_factory=list)
    #: per agent with a permission table of its own: ``{"agent", "file" (its markdown file or
    #: None), "missing": [key], "heldBack": [{"key", "decision", "by", "file"}]}``
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
        return {"config": str(self.path), "exists": self.exists, "server": SERVER, "complete": self.complete,
                "required": self.required, "missing": self.missing, "heldBack": self.held_back, "agents": self.agents,
                "roleAdmin": {"allowed": self.role_admin_allowed, "why": ROLE_ADMIN_REASON}, "tools": self.tools}


@dataclass
class AgentTable:
    """One agent's own permission table: ``permission`` as opencode applies it (the config's
    ``agent.<name>.permission`` with the markdown file's merged over it), ``from_file`` the
    file's part (None: no file, or one without ``permission``), ``file`` that file's path."""

    name: str
    permission: Any
    from_file: Any = None
    file: Path | None = None


def merge_tables(base: Any, over: Any) -> Any:
    """``over`` merged over ``base`` as opencode merges a markdown agent over the config's
    (objects key by key, a shared key keeping ``base``'s place, new keys after; else ``over``)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = merge_tables(base[key], value) if key in base else value
        return out
    return over


def front_matter(text: str) -> dict[str, Any] | None:
    """The YAML front matter (between ``---`` lines at the top) of a markdown agent file, or
    None when it has none or opencode could not read it (opencode then skips the file)."""
    match = re.match(r"\A---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", text, re.DOTALL)
    if not match:
        return None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def markdown_agents(folder: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """``{agent name: (file, front matter)}`` of the markdown agents opencode loads from the
    config folder ``folder``: ``{agent,agents}/**/*.md`` (name: the path below that folder
    without ``.md``) and ``{mode,modes}/*.md``; unreadable files are left out, as opencode does."""
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for sub, pattern in (("agent", "**/*.md"), ("agents", "**/*.md"), ("mode", "*.md"), ("modes", "*.md")):
        for file in sorted((folder / sub).glob(pattern)):
            try:
                matter = front_matter(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
            if matter is not None:
                found[file.relative_to(folder / sub).with_suffix("").as_posix()] = (file, matter)
    return found


def agent_tables(path: Path, data: dict[str, Any]) -> list[AgentTable]:
    """The agents with a permission table of their own, from the config ``data`` (of
    ``path``) and the markdown agents in ``path``'s folder; disabled agents left out."""
    agent = data.get("agent")
    configured: dict[str, Any] = agent if isinstance(agent, dict) else {}
    files = markdown_agents(path.parent)
    tables: list[AgentTable] = []
    for name in [*configured, *(n for n in files if n not in configured)]:
        value = configured.get(name)
        entry: dict[str, Any] = value if isinstance(value, dict) else {}
        file, matter = files.get(name, (None, {}))
        if entry.get("disable") is True or matter.get("disable") is True:
            continue
        if "permission" not in entry and "permission" not in matter:
            continue
        own = entry.get("permission", {})
        if "permission" in matter:
            tables.append(AgentTable(name, merge_tables(own, matter["permission"]), matter["permission"], file))
        else:
            tables.append(AgentTable(name, own))
    return tables


def parse(path: Path, raw: bytes | None) -> dict[str, Any]:
    """The config object of ``raw`` (the bytes of ``path``; None or blank: empty).

    :raises ConfigFileError: ``malformed``: not UTF-8, not plain JSON (a config with comments,
        JSONC, is refused, never rewritten), or not an object.
    """
    if raw is None:
        return {}
    text = decode_utf8(path, raw)
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


def load_config(path: Path, must_exist: bool = True) -> tuple[bytes | None, dict[str, Any]]:
    """``(raw bytes, or None when absent; the parsed object)`` of the opencode config at ``path``.

    :raises ConfigFileError: missing (when ``must_exist``), unreadable, or as :func:`parse`.
    """
    try:
        raw = read_bytes(path)
    except ConfigFileError as exc:
        if exc.kind == "missing" and not must_exist:
            return None, {}
        raise
    return raw, parse(path, raw)


def check(path: Path, raw: bytes | None, data: dict[str, Any], tools: Iterable[ToolInfo], all_tools: bool = False) -> OpencodeCheck:
    """Check the parsed config ``data`` (of ``path``; ``raw`` None: absent) for ``tools``.

    :param all_tools: require every tool but the role-admin ones, not just the read-only ones.
    """
    tools = list(tools)
    permission = data.get("permission")
    required = sorted(tool_key(SERVER, t.name) for t in tools if not t.role_admin and (all_tools or t.is_read_only))
    result = OpencodeCheck(path, raw is not None, required)
    for tool in tools:
        key = tool_key(SERVER, tool.name)
        action, by = decide(permission, key)
        result.tools.append({"tool": tool.name, "key": key, "decision": action, "by": by})
        if tool.role_admin and action in ("allow", "none"):
            result.role_admin_allowed.append(key)
        if key not in required or action in ("allow", "none"):
            continue
        if not isinstance(permission, dict) or key in permission:  # the user's own key for it: never moved or changed
            result.held_back.append({"key": key, "decision": action, "by": by})
        else:
            result.missing.append(key)
    for table in agent_tables(path, data):
        result.agents.append(_check_agent(table, tools, required, result))
    return result


def _check_agent(table: AgentTable, tools: list[ToolInfo], required: list[str], result: OpencodeCheck) -> dict[str, Any]:
    """One agent's verdict: only a key of its own table can make a tool ask there (with none
    matching, it follows the top level, checked already)."""
    entry: dict[str, Any] = {"agent": table.name, "file": str(table.file) if table.file else None, "missing": [], "heldBack": []}
    for tool, row in zip(tools, result.tools, strict=True):
        key = row["key"]
        action, by = decide(table.permission, key)
        if action == "none":
            continue
        row.setdefault("agents", {})[table.name] = action
        if tool.role_admin and action == "allow":
            result.role_admin_allowed.append(f"{key} (agent {table.name})")
        if key not in required or action == "allow":
            continue
        in_file = table.file is not None and (not isinstance(table.from_file, dict) or by in table.from_file)
        if in_file or not isinstance(table.permission, dict) or key in table.permission:
            entry["heldBack"].append({"key": key, "decision": action, "by": by, "file": str(table.file) if in_file else None})
        else:
            entry["missing"].append(key)
    return entry


def plan(path: Path, raw: bytes | None, keys: list[str], agent_keys: Mapping[str, list[str]] | None = None) -> tuple[str, str]:
    """``(old text, new text)``: ``keys`` added with ``"allow"`` at the end of ``permission``
    (created when absent) and ``agent_keys`` (``{agent name: [key]}``) at the end of
    ``agent.<name>.permission`` (which must exist), the rest of the config and its indentation kept.

    :raises ConfigFileError: ``malformed`` when a table to extend is not an object, or when the
        new text would not read back as intended.
    """
    old_text = raw.decode("utf-8") if raw is not None else ""
    data = strict_json(old_text) if old_text.strip() else {}
    targets: list[tuple[list[str], list[str]]] = [(["permission"], keys)] if keys else []
    targets += [(["agent", name, "permission"], names) for name, names in (agent_keys or {}).items() if names]
    intended = json.loads(json.dumps(data))
    for where, names in targets:
        for doc in (data, intended):
            table = doc.setdefault("permission", {}) if where == ["permission"] else doc.get("agent", {}).get(where[1], {}).get("permission")
            if not isinstance(table, dict):
                raise ConfigFileError("malformed", f"{path}: {'.'.join(where)} is not a JSON object")
            table.update((key, "allow") for key in names)
    new_text = json.dumps(data, indent=_indent(old_text), ensure_ascii=False) + "\n"
    again = strict_json(new_text)
    for where, names in targets:
        table = again["permission"] if where == ["permission"] else again["agent"][where[1]]["permission"]
        if any(decide(table, key)[0] != "allow" for key in names):
            again = None
            break
    if again != intended:
        raise ConfigFileError("malformed", f"{path}: the new config did not read back as intended; nothing was written")
    return old_text, new_text
