"""The Codex plugin's MCP server declaration (``.codex-plugin/mcp.json``).

Codex gives an MCP server's process only the variables the declaration names in ``env_vars``
(verified on the pinned Codex by ``test_codex_realhost_install``), so every variable agent-link
reads must be named there, or a setting made in the shell silently misses Codex's server: that
is walked for every host by ``tests/test_host_server_env.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.codex_host import REPO_ROOT
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError



def declaration() -> dict:
    return json.loads((REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / ".codex-plugin" / "mcp.json").read_text())["mcpServers"]["codex-agent-link"]


def test_the_server_is_required() -> None:
    """Codex builds the first turn without an optional server it has not listed within about a
    second; a required one it waits for. (Required, a server that fails to start fails the
    thread: the launcher then stands in, see below.)"""
    assert declaration()["required"] is True


# -- the launcher when agent-link is missing or cannot run (issue 25) ---------------------
# Both host plugins ship this launcher byte for byte (plugins/claude/tests/test_claude_packaging.py).

LAUNCHER = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / "hooks" / "agent-link.sh"
BARE_PATH = "/usr/bin:/bin"  # sh and awk, no agent-link


def launcher_copy(tmp_path: Path, installed: str | None = None) -> Path:
    copy = tmp_path / "agent-link.sh"
    text = LAUNCHER.read_text()
    if installed is not None:
        text = text.replace("installed_bin=''", f"installed_bin='{installed}'", 1)
    copy.write_text(text)
    return copy


async def open_stand_in(launcher: Path, errlog: Any) -> tuple[Any, Any, Any]:
    params = StdioServerParameters(command="sh", args=[str(launcher), "mcp"], env={"PATH": BARE_PATH})
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        with pytest.raises(MCPError) as refused:
            await session.call_tool("agent_link_health", {})
        return init, listed, refused.value


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["missing", "interpreter-gone"])
async def test_without_a_usable_agent_link_the_launcher_answers_with_no_tools(tmp_path: Path, case: str) -> None:
    if case == "missing":
        launcher, expected = launcher_copy(tmp_path, str(tmp_path / "gone" / "agent-link")), "executable not found"
    else:  # what a deleted virtualenv leaves: the entry script, its Python gone
        script = tmp_path / "venv" / "bin" / "agent-link"
        script.parent.mkdir(parents=True)
        script.write_text(f"#!{tmp_path / 'venv' / 'bin' / 'python'}\nprint('never')\n")
        script.chmod(0o755)
        launcher, expected = launcher_copy(tmp_path, str(script)), f"its interpreter {tmp_path / 'venv' / 'bin' / 'python'} is missing"
    with (tmp_path / "stderr").open("w+") as errlog:
        init, listed, refused = await open_stand_in(launcher, errlog)
        errlog.seek(0)
        logged = errlog.read()
    assert init.server_info.name == "agent-link" and init.server_info.version == "unavailable"
    assert expected in init.instructions and listed.tools == []
    assert refused.error.code == -32601 and expected in refused.error.message
    assert "agent-link: " in logged and expected in logged and "runs without agent-link" in logged


def test_the_stand_in_finds_the_request_id_wherever_it_is(tmp_path: Path) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": "s-1", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "id": 9}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"method": "tools/list", "params": {"cursor": None, "_meta": {"id": 3}}, "jsonrpc": "2.0", "id": 41},
        {"jsonrpc": "2.0", "id": -2, "method": "ping"},
    ]
    done = subprocess.run(["sh", str(launcher_copy(tmp_path)), "mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, env={"PATH": BARE_PATH}, timeout=30, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["s-1", 41, -2]
    assert answers[0]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[1]["result"] == {"tools": []} and answers[2]["result"] == {}


def test_a_hook_without_agent_link_says_nothing_and_succeeds(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(launcher_copy(tmp_path)), "hook", "codex", "UserPromptSubmit"], input='{"prompt": "hi"}',
                          capture_output=True, text=True, env={"PATH": BARE_PATH}, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_other_commands_without_agent_link_fail_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(launcher_copy(tmp_path)), "health"], capture_output=True, text=True,
                          env={"PATH": BARE_PATH}, timeout=30, check=False)
    assert done.returncode == 127 and "executable not found" in done.stderr and done.stdout == ""


def test_a_usable_agent_link_is_run(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(launcher_copy(tmp_path, str(Path(sys.executable).with_name("agent-link")))), "--version"],
                          capture_output=True, text=True, env={"PATH": BARE_PATH, "HOME": str(tmp_path)}, timeout=60,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
