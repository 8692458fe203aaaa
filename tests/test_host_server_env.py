"""Every variable any installed plugin reads reaches every host's agent-link server (issue 29,
item 8: a Codex thread could not reach Claude sessions when ``CLAUDE_CONFIG_DIR`` was set).

Codex gives an MCP server's process only the variables its declaration names in ``env_vars``
(plus a few of its own: HOME, PATH, ...; verified on the pinned Codex by
``plugins/codex/tests/test_codex_realhost_install.py``). Claude Code starts a plugin's MCP
server with its own environment plus the declaration's ``env``. So the variables to pass are
walked from what the core and the plugins declare (settings with their aliases,
``CORE_ENV_VARIABLES``, each harness's ``env_variables``) and from what their code reads (a scan of every plugin package for
``env.get("X")``-style reads), and checked against each host's declaration. A harness's
``host_variables`` (the per-process session variables) are never passed: a server must not
inherit the session of the process that started its host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.config import CORE_ENV_VARIABLES, CORE_SETTINGS
from agent_link_hostkit.fastfront import HANDOVER_VARIABLES

REPO = Path(__file__).resolve().parents[1]
CODEX_DECLARATION = REPO / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / ".codex-plugin" / "mcp.json"
CLAUDE_DECLARATION = REPO / "plugins" / "claude" / "agent_link_claude" / "host_plugin" / ".claude-plugin" / "plugin.json"
#: what Codex passes to every MCP server without being asked (its default environment)
CODEX_DEFAULTS = frozenset({"HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ"})
#: per-process variables of a host's turn, set by the host where it means them
TURN_VARIABLES = frozenset({"CODEX_TURN_ID", "CODEX_TOOL_CALL_ID"})
#: the server keys Claude Code reads; none of them narrows the environment
CLAUDE_SERVER_KEYS = frozenset({"command", "args", "env", "alwaysLoad", "cwd"})
READ_RE = re.compile(r"""(?:\benv(?:iron)?|\.env)(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]{2,})["']|getenv\(\s*["']([A-Z][A-Z0-9_]{2,})["']""")


def scanned_reads() -> dict[str, set[str]]:
    """``{variable: {files}}`` of literal environment reads in the core and every plugin package."""
    found: dict[str, set[str]] = {}
    roots = [REPO / "agent_link_core", *sorted((REPO / "plugins").glob("*/agent_link_*"))]
    for root in roots:
        for path in root.rglob("*.py"):
            for match in READ_RE.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(match.group(1) or match.group(2), set()).add(str(path.relative_to(REPO)))
    return found


@pytest.mark.installed_plugins
def test_every_variable_a_plugin_reads_reaches_every_hosts_server() -> None:
    app = App.create()
    try:
        settings = [*CORE_SETTINGS, *app.hooks.settings()]
        session_variables = {v for h in app.harnesses.values() for v in h.host_variables} | TURN_VARIABLES
        declared = {s.name for s in settings} | {a for s in settings for a in s.aliases if "AGENT_LINK" in a}
        declared |= {v for h in app.harnesses.values() for v in h.env_variables}
        harness_names = sorted(app.harnesses)
    finally:
        app.close()
    assert {"claude", "codex"} <= set(harness_names)
    declared |= set(CORE_ENV_VARIABLES)
    reads = scanned_reads()
    # what the code reads is declared somewhere: a setting, a harness's env_variables, a session variable
    undeclared = {v: sorted(files) for v, files in reads.items()
                  if v not in declared | session_variables | CODEX_DEFAULTS and not v.startswith("AGENT_LINK_")}
    assert not undeclared, f"declare these (a Setting or the harness's env_variables): {undeclared}"
    assert not {v for v in session_variables if v in declared}, "a session variable is declared to be passed"

    codex = json.loads(CODEX_DECLARATION.read_text())["mcpServers"]["codex-agent-link"]
    passed = set(codex["env_vars"])
    # the launcher sets its hand-over variables itself for the process it execs; a host never passes them
    wanted = ((declared | {v for v in reads if v.startswith("AGENT_LINK_")}) - set(codex.get("env", {})) - CODEX_DEFAULTS
              - HANDOVER_VARIABLES)
    missing = sorted(wanted - passed)
    assert not missing, f"add to {CODEX_DECLARATION.relative_to(REPO)} env_vars: {missing}"
    assert {"CLAUDE_CONFIG_DIR", "CODEX_HOME"} <= passed  # the example
    assert not passed & session_variables, "Codex's server must not inherit a session variable"

    for name, server in json.loads(CLAUDE_DECLARATION.read_text())["mcpServers"].items():
        assert set(server) <= CLAUDE_SERVER_KEYS, f"{name}: a key Claude Code might filter the environment with"
