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
  lists the request) until someone answers it.

So a tool is "missing" when a wildcard key makes it ask or deny: ``apply`` adds the tool's exact
name with ``"allow"`` at the end of ``permission``, where it decides. A tool whose exact name the
user already has in ``permission`` (whatever its value and place) is held back: a JSON object
has one copy of a key, and moving or changing it would change what the user wrote; so is a
config whose ``permission`` is one action for every tool. Per-agent ``agent.<name>.permission`` tables are not read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    @property
    def complete(self) -> bool:
        """Every required tool runs unasked."""
        return not self.missing and not self.held_back

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"config": str(self.path), "exists": self.exists, "server": SERVER, "complete": self.complete,
                "required": self.required, "missing": self.missing, "heldBack": self.held_back,
                "roleAdmin": {"allowed": self.role_admin_allowed, "why": ROLE_ADMIN_REASON}, "tools": self.tools}


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
    return result


def plan(path: Path, raw: bytes | None, keys: list[str]) -> tuple[str, str]:
    """``(old text, new text)``: ``keys`` added with ``"allow"`` at the end of ``permission``
    (created when absent), the rest of the config and its indentation kept.

    :raises ConfigFileError: ``malformed`` when ``permission`` is not an object, or when the
        new text would not read back as intended.
    """
    old_text = raw.decode("utf-8") if raw is not None else ""
    data = strict_json(old_text) if old_text.strip() else {}
    permission = data.setdefault("permission", {})
    if not isinstance(permission, dict):
        raise ConfigFileError("malformed", f"{path}: permission is not a JSON object")
    intended = json.loads(json.dumps(data))
    for key in keys:
        permission[key] = "allow"
        intended["permission"][key] = "allow"
    new_text = json.dumps(data, indent=_indent(old_text), ensure_ascii=False) + "\n"
    again = strict_json(new_text)
    if again != intended or any(decide(again["permission"], key)[0] != "allow" for key in keys):
        raise ConfigFileError("malformed", f"{path}: the new config did not read back as intended; nothing was written")
    return old_text, new_text
