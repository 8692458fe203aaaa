"""``agent-link install claude`` / ``agent-link uninstall claude`` against the REAL pinned
Claude Code.

In a temporary HOME, with an ``agent-link`` entry point outside the checkout
(:func:`agent_link_testing.dists.agent_link_elsewhere`), the checkout's ``.venv/bin`` off PATH
and no ``AGENT_LINK_BIN``:

* ``--dry-run`` prints the steps and changes nothing;
* install registers the small plugin folder: it and Claude Code's cached copy are under 1 MB,
  and a ``claude -p`` whose model calls ``agent_link_health`` through the installed plugin gets
  its result (the launcher runs the entry point it was installed with);
* uninstall removes the plugin, the marketplace, Claude Code's leftover cache copy and
  agent-link's folder; ``claude -p`` still runs afterwards, without the tools, and a second
  uninstall is fine.

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.dists import agent_link_elsewhere
from agent_link_testing.messages_stub import MessagesStub, Reply

from agent_link_hostkit.host_install import folder_size, plugin_dir

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(600)]

SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
BOUND_S = 300.0  # a bound per command, never a speed assertion
MB = 1024 * 1024


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-4000:])
    return done


def test_install_and_uninstall_through_the_command(tmp_path: Path) -> None:
    agent_link = str(agent_link_elsewhere(tmp_path / "elsewhere"))
    venv_bin = Path(sys.executable).parent.resolve()
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != venv_bin)
    cwd = tmp_path / "project"
    cwd.mkdir()
    with MessagesStub() as stub:
        host = ClaudeHost.create(tmp_path / "home", stub=stub, env={"PATH": path, "AGENT_LINK_BIN": None,
                                                                    "AGENT_LINK_STATE_DIR": str(tmp_path / "state")})
        env = host.environ()
        assert "AGENT_LINK_BIN" not in env and str(venv_bin) not in env["PATH"].split(os.pathsep)
        claude = str(host.binary)
        folder = plugin_dir("claude", env)
        cache = host.config_dir / "plugins" / "cache" / "agent-link"

        dry = run([agent_link, "install", "claude", "--dry-run", "--host-bin", claude], env, cwd)
        assert "plugin marketplace add" in dry.stdout and "dry run" in dry.stdout
        assert not folder.exists() and not cache.exists()

        run([agent_link, "install", "claude", "--host-bin", claude], env, cwd)
        assert 0 < folder_size(folder) < MB
        [copy] = (cache / "agent-link").iterdir()
        assert 0 < folder_size(copy) < MB and not (copy / ".venv").exists()
        assert f"installed_bin={agent_link}" in (folder / "hooks" / "agent-link.sh").read_text()

        host.allow_tools(SERVER_RULE)
        stub.enqueue(Reply.tool_use(f"{SERVER_RULE}__agent_link_health", {}), "Healthy.")
        done = host.run_p("how is agent-link?", cwd=cwd, timeout_s=BOUND_S)
        assert done.returncode == 0, done.stderr
        [block] = stub.main_requests[-1].tool_results()
        content = block["content"]
        health = json.loads(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
        assert health["ok"] and health["host"] == "claude"
        assert Path(health["stateDir"]["path"]) == tmp_path / "state"

        run([agent_link, "uninstall", "claude", "--host-bin", claude], env, cwd)
        assert not cache.exists() and not (tmp_path / "home" / ".local" / "share" / "agent-link").exists()
        settings = json.loads(host.settings_path.read_text())
        assert not settings.get("enabledPlugins") and not settings.get("extraKnownMarketplaces")
        stub.enqueue("Still here.")
        after = host.run_p("still there?", cwd=cwd, timeout_s=BOUND_S)  # Claude Code still starts
        assert after.returncode == 0, after.stderr
        assert not any(SERVER_RULE in name for name in stub.main_requests[-1].tool_names())
        run([agent_link, "uninstall", "claude", "--host-bin", claude], env, cwd)  # twice is fine
