"""Tool approvals in a Codex ``config.toml`` for the agent-link plugin.

How Codex decides (observed on the real Codex CLI 0.169.0; see ``plugins/approvals/README.md``):

* a plugin is on with ``[plugins."<plugin>@<marketplace>"] enabled = true`` (``codex plugin
  add`` writes it);
* each tool of the plugin's MCP server ``<srv>`` has an approval mode: the tool's own
  ``[plugins."<id>".mcp_servers.<srv>.tools.<tool>] approval_mode``, else the server's
  ``[plugins."<id>".mcp_servers.<srv>] default_tools_approval_mode``, else ``auto``;
* the modes: ``approve`` never asks; ``prompt`` always asks; ``writes`` asks unless the tool
  says ``readOnlyHint: true``; ``auto`` asks for a tool with ``destructiveHint: true``, never
  for one with ``readOnlyHint: true``, and otherwise asks unless the tool says both
  ``destructiveHint: false`` and ``openWorldHint: false`` (an absent hint counts as true);
* "asks" means: the call fails under ``approval_policy = "never"``, and raises an
  ``mcpServer/elicitation/request`` under ``on-request``.

The config is read with :mod:`tomllib`. :func:`plan_append` renders the missing tables with
tomli-w and appends them to the file's unchanged bytes; the result is parsed again and must
equal the intended merge, or the entry is reported as a hand edit instead.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from agent_link_approvals.files import ConfigFileError, decode_utf8, read_bytes
from agent_link_approvals.toollist import ROLE_ADMIN_REASON, ToolInfo

MODES = ("auto", "prompt", "writes", "approve")
APPROVE = "approve"
HEADER = "# Added by `agent-link approvals apply`: agent-link tools Codex may run without asking.\n"


def needs_approval(mode: str, tool: ToolInfo) -> bool:
    """Whether Codex asks before ``tool`` runs under approval ``mode`` (one of :data:`MODES`;
    anything else is treated as ``prompt``)."""
    if mode == "approve":
        return False
    if mode == "writes":
        return not tool.is_read_only
    if mode == "auto":
        if tool.destructive is True:
            return True
        if tool.is_read_only:
            return False
        return tool.destructive is not False or tool.open_world is not False
    return True


def load_config(path: Path) -> tuple[bytes, dict[str, Any]]:
    """The file's bytes and parsed content.

    :raises ConfigFileError: missing, unreadable, or ``malformed`` (see :func:`parse_config`).
    """
    raw = read_bytes(path)
    return raw, parse_config(path, raw)


def parse_config(path: Path, raw: bytes) -> dict[str, Any]:
    """``raw`` (the bytes of the config at ``path``) parsed as TOML.

    :raises ConfigFileError: ``malformed``: not UTF-8, the TOML error with its line and
        column, or nested too deeply to read.
    """
    text = decode_utf8(path, raw)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError("malformed", f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigFileError("malformed", f"{path} is nested too deeply to read (arrays or inline tables "
                                           "inside each other thousands of levels deep)") from None


@dataclass
class ToolApproval:
    """What Codex does for one tool of one server.

    :param mode: the effective approval mode (possibly an invalid value from the file).
    :param source: where it comes from: ``tool``, ``server`` or ``default``.
    :param approved: Codex runs it without asking.
    """

    server: str
    tool: ToolInfo
    mode: str
    source: str
    approved: bool

    def reason(self) -> str:
        """Why it is (not) approved, in words."""
        where = {"tool": "its own approval_mode", "server": "the server's default_tools_approval_mode",
                 "default": "Codex's default mode"}[self.source]
        return f"{self.mode!r} from {where}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {"server": self.server, "tool": self.tool.name, "readOnly": self.tool.is_read_only,
                "mode": self.mode, "modeSource": self.source, "approved": self.approved}


@dataclass
class CodexCheck:
    """The result of checking one config against the tools.

    :param required: tool names that must run without asking (the read-only ones, or all but
        the role-admin tools with ``--all``).
    :param missing: ``(server, tool)`` pairs of required tools Codex would ask for, that the
        config leaves to a default (``apply`` adds an ``approval_mode = "approve"`` table).
    :param kept: required tools whose own ``approval_mode`` says otherwise: the user chose
        it, so ``apply`` leaves it (``(server, tool, mode)``).
    :param additions: the tables ``apply`` would add, as a nested dict.
    """

    plugin_id: str
    servers: list[str]
    all_tools: bool
    enabled: Any
    approvals: list[ToolApproval]
    required: list[str]
    missing: list[tuple[str, str]] = field(default_factory=list)
    kept: list[tuple[str, str, str]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    additions: dict[str, Any] = field(default_factory=dict)
    #: the plugin's servers the config also has as a top-level ``[mcp_servers.<name>]`` (the
    #: original Agent Link's entry is ``codex-agent-link``): Codex runs that one instead
    shadowed: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every required tool runs without asking, the plugin is on and its server is not shadowed."""
        return self.enabled is True and not self.missing and not self.kept and not self.invalid and not self.shadowed

    def side_effecting(self) -> tuple[list[str], list[str]]:
        """``(auto-approved, all)`` names of the tools without ``readOnlyHint: true``."""
        names = sorted({a.tool.name for a in self.approvals if not a.tool.is_read_only})
        approved = sorted({a.tool.name for a in self.approvals if not a.tool.is_read_only and a.approved})
        return approved, names

    def role_admin_approved(self) -> list[str]:
        """Role-admin tools this config lets run without asking (should be none)."""
        return sorted({a.tool.name for a in self.approvals if a.tool.role_admin and a.approved})

    def approved_required(self) -> int:
        """How many required tools run without asking (on every server)."""
        return sum(1 for name in self.required
                   if all(a.approved for a in self.approvals if a.tool.name == name))

    def snippet(self) -> str:
        """Ready-to-paste TOML for :attr:`additions` ("" when nothing is missing)."""
        return tomli_w.dumps(self.additions) if self.additions else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        approved, side = self.side_effecting()
        return {
            "pluginId": self.plugin_id, "servers": self.servers, "all": self.all_tools,
            "pluginEnabled": self.enabled, "complete": self.complete,
            "required": self.required, "requiredApproved": self.approved_required(),
            "missing": [{"server": s, "tool": t} for s, t in self.missing],
            "keptByYou": [{"server": s, "tool": t, "mode": m} for s, t, m in self.kept],
            "invalid": self.invalid,
            "shadowedBy": [f"[mcp_servers.{tomli_w_key(s)}]" for s in self.shadowed],
            "sideEffecting": {"approved": approved, "count": len(side), "approvedCount": len(approved)},
            "roleAdmin": {"tools": sorted({a.tool.name for a in self.approvals if a.tool.role_admin}),
                          "autoApproved": self.role_admin_approved(), "why": ROLE_ADMIN_REASON},
            "tools": [a.to_dict() for a in self.approvals],
            "snippet": self.snippet(),
        }


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def check(config: dict[str, Any], plugin_id: str, servers: Iterable[str], tools: Iterable[ToolInfo],
          all_tools: bool = False) -> CodexCheck:
    """Check a parsed config.

    :param config: the parsed ``config.toml``.
    :param plugin_id: ``<plugin>@<marketplace>``.
    :param servers: the plugin's MCP server keys that run agent-link.
    :param tools: the tools agent-link offers.
    :param all_tools: require every tool but the role-admin ones (``--all``), not just the
        read-only ones.
    """
    tools = list(tools)
    servers = list(servers)
    entry = _table(_table(config.get("plugins")).get(plugin_id))
    required = sorted(t.name for t in tools if not t.role_admin and (all_tools or t.is_read_only))
    result = CodexCheck(plugin_id, servers, all_tools, entry.get("enabled"), [], required)
    result.shadowed = [s for s in servers if isinstance(_table(config.get("mcp_servers")).get(s), dict)]
    if entry.get("enabled") is None:  # an explicit false is the user's choice and stays
        result.additions = {"plugins": {plugin_id: {"enabled": True}}}
    for server in servers:
        srv = _table(_table(entry.get("mcp_servers")).get(server))
        default = srv.get("default_tools_approval_mode")
        if default is not None and default not in MODES:
            result.invalid.append(f"[plugins.{tomli_w_key(plugin_id)}.mcp_servers.{tomli_w_key(server)}] "
                                  f"default_tools_approval_mode = {default!r} is not one of {', '.join(MODES)}")
        for tool in tools:
            own = _table(_table(srv.get("tools")).get(tool.name)).get("approval_mode")
            mode, source = (own, "tool") if own is not None else (default, "server") if default is not None else ("auto", "default")
            if own is not None and own not in MODES:
                result.invalid.append(f"approval_mode = {own!r} of tool {tool.name} is not one of {', '.join(MODES)}")
            approval = ToolApproval(server, tool, str(mode), source, not needs_approval(str(mode), tool))
            result.approvals.append(approval)
            if tool.name in required and not approval.approved:
                if source == "tool":
                    result.kept.append((server, tool.name, str(mode)))
                else:
                    result.missing.append((server, tool.name))
                    node = result.additions.setdefault("plugins", {}).setdefault(plugin_id, {})
                    node.setdefault("mcp_servers", {}).setdefault(server, {}).setdefault("tools", {})[tool.name] = {
                        "approval_mode": APPROVE}
    return result


def tomli_w_key(key: str) -> str:
    """``key`` as tomli-w writes it in a table header (bare when it can be, quoted otherwise)."""
    return tomli_w.dumps({key: 1}).split(" = ", 1)[0]


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the tables of ``extra`` merged in (a new dict; ``base`` is unchanged)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _groups(additions: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The tables of ``additions`` as ``(path, keys that are not tables)``, in render order."""
    own = {k: v for k, v in additions.items() if not isinstance(v, dict)}
    out = [(path, own)] if own else []
    for key, value in additions.items():
        if isinstance(value, dict):
            out.extend(_groups(value, (*path, key)))
    return out


def _nest(path: tuple[str, ...], keys: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = dict(keys)
    for key in reversed(path):
        node = {key: node}
    return node


@dataclass
class AppendPlan:
    """What ``apply`` writes to a Codex config.

    :param new_text: the whole new file (the old text, unchanged, plus the appended block).
    :param appended: the tables that could be appended (nested dict).
    :param by_hand: ``(table header, "key = value")`` that cannot be appended because the
        table already exists in the file (TOML allows each table once).
    """

    old_text: str
    new_text: str
    appended: dict[str, Any]
    by_hand: list[tuple[str, str]]

    @property
    def changed(self) -> bool:
        """Something is appended."""
        return self.new_text != self.old_text


def _header(path: tuple[str, ...]) -> str:
    return "[" + ".".join(tomli_w_key(k) for k in path) + "]"


def _append(old_text: str, block: str) -> str:
    newline = "\r\n" if "\r\n" in old_text else "\n"
    if newline != "\n":
        block = block.replace("\n", newline)
    if not old_text:
        return block
    sep = "" if old_text.endswith(("\n", "\r")) else newline
    return old_text + sep + newline + block


def _renders(old_text: str, old_data: dict[str, Any], additions: dict[str, Any]) -> str | None:
    """The appended text when it parses to exactly the intended merge, else None."""
    text = _append(old_text, HEADER + tomli_w.dumps(additions))
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return text if parsed == merge(old_data, additions) else None


def plan_append(old_text: str, old_data: dict[str, Any], additions: dict[str, Any]) -> AppendPlan:
    """Append ``additions`` to ``old_text`` as new tables, keeping every old byte.

    Tables are tried together, then one by one; a table whose append does not parse back to
    the intended merge (the file already defines it, or defines its parent inline) becomes a
    hand edit. The returned ``new_text`` always parses to ``merge(old_data, appended)``.
    """
    if not additions:
        return AppendPlan(old_text, old_text, {}, [])
    whole = _renders(old_text, old_data, additions)
    if whole is not None:
        return AppendPlan(old_text, whole, additions, [])
    kept: dict[str, Any] = {}
    new_text = old_text
    by_hand: list[tuple[str, str]] = []
    for path, keys in _groups(additions):
        trial = merge(kept, _nest(path, keys))
        rendered = _renders(old_text, old_data, trial)
        if rendered is None:
            by_hand.append((_header(path), tomli_w.dumps(keys).strip()))
        else:
            kept, new_text = trial, rendered
    return AppendPlan(old_text, new_text, kept, by_hand)
