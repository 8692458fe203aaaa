"""A broken plugin makes health not ok: ``agent-link health`` exits 1 naming the plugin and
why, one line each, ``--json`` says ``ok: false`` with the plugin under ``problems``, and the
``agent_link_health`` tool lists it there too. A healthy plugin, or a broken one turned off
with ``AGENT_LINK_DISABLE_PLUGINS``, keeps health ok.

Each plugin is installed the way pip installs one (:mod:`agent_link_testing.dists`) and
``agent-link`` runs in a subprocess, so loading goes through the real entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.dists import install_dist
from agent_link_testing.mcp_client import agent_link_mcp

# each way a plugin breaks -> its plugin.py and words its problem line must hold
BROKEN = {
    "import": ('raise RuntimeError("no config for the widget")\n', "import failed: RuntimeError: no config for the widget"),
    "registration": ('''
        from agent_link_core import hookimpl

        @hookimpl
        def agent_link_register_tools(nonsense):
            return None
        ''', "agent_link_register_tools takes nonsense"),
    # a record the guard refuses: the plugin is disabled for the rest of the process
    "disabled": ('''
        from agent_link_core import hookimpl
        from agent_link_core.tools.registry import ToolSpec

        async def mine(app, arguments, call):
            return {}

        @hookimpl
        def agent_link_register_tools(register):
            register(ToolSpec(name="agent_link_health", title="mine", description="mine", input_schema={"type": "object"},
                              output_fields={}, handler=mine))
        ''', "registered tool 'agent_link_health'"),
    "hook raises": ('''
        from agent_link_core import hookimpl

        @hookimpl
        def agent_link_health(app):
            raise ValueError("the widget's socket is gone")
        ''', "agent_link_health: ValueError: the widget's socket is gone"),
}
HEALTHY = '''
from agent_link_core import hookimpl

@hookimpl
def agent_link_health(app):
    return "widget", {"summary": "fine"}
'''


def install(site: Path, source: str) -> None:
    install_dist(site, "agent_link_widget", {"plugin.py": source}, entry_name="widget", entry_module="agent_link_widget.plugin")


def run(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(site), "AGENT_LINK_LOAD_PLUGINS": "widget", **env}
    return subprocess.run([sys.executable, "-m", "agent_link_core", *args], capture_output=True, text=True,
                          env=full, timeout=120, check=False)


@pytest.mark.parametrize("how", list(BROKEN))
def test_health_names_a_broken_plugin_and_exits_1(how: str, tmp_path: Path) -> None:
    source, why = BROKEN[how]
    install(tmp_path, source)
    human = run(tmp_path, "health")
    assert human.returncode == 1, (human.stdout, human.stderr)
    lines = [line for line in human.stdout.splitlines() if "widget" in line and why in line]
    assert len(lines) == 1 and "AGENT_LINK_DISABLE_PLUGINS=widget" in lines[0], human.stdout
    assert "Traceback" not in human.stderr

    as_json = run(tmp_path, "health", "--json")
    assert as_json.returncode == 1, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["ok"] is False
    (problem,) = data["problems"]
    assert problem["plugin"] == "widget" and why in problem["message"], problem
    assert "AGENT_LINK_DISABLE_PLUGINS=widget" in problem["hint"]

    # `plugins` lists it as broken too (a listing: it exits 0)
    listed = run(tmp_path, "plugins")
    error = why.split(": ", 1)[-1]  # its lines name the hook apart
    assert listed.returncode == 0 and any("widget" in line and error in line for line in listed.stdout.splitlines()), listed.stdout


def test_a_healthy_plugin_keeps_health_ok(tmp_path: Path) -> None:
    install(tmp_path, HEALTHY)
    done = run(tmp_path, "health", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is True and data["problems"] == [] and data["plugins"]["loaded"] == ["widget"]
    assert run(tmp_path, "health").returncode == 0


def test_a_broken_plugin_turned_off_keeps_health_ok(tmp_path: Path) -> None:
    """Its fault in another process (an MCP server) is silenced too, as the hint promises."""
    install(tmp_path, BROKEN["hook raises"][0])
    assert run(tmp_path, "health").returncode == 1  # the fault is now in the state dir's problem log
    done = run(tmp_path, "health", "--json", AGENT_LINK_DISABLE_PLUGINS="widget")
    assert done.returncode == 0, done.stdout
    data = json.loads(done.stdout)
    assert data["ok"] is True and data["problems"] == [] and data["plugins"]["elsewhere"] == []
    assert "warning" not in data["plugins"]
    # a misspelt name turns nothing off: health says so (a warning: health stays what it is) and names the plugins
    typo = run(tmp_path, "health", AGENT_LINK_DISABLE_PLUGINS="widgte")
    said = " ".join(typo.stdout.split())
    assert typo.returncode == 1 and "warning: AGENT_LINK_DISABLE_PLUGINS names widgte, which no installed plugin is called" in said
    assert "widget" in said.split("Plugin names (exact case): ")[1].split(".")[0].split(", "), said


def test_a_fault_in_another_process_makes_health_not_ok(tmp_path: Path) -> None:
    """A plugin that failed in an MCP server: the next ``agent-link health`` still says so, once
    however many processes met it."""
    install(tmp_path, BROKEN["hook raises"][0])
    for _ in range(2):  # two processes meet the same fault
        assert run(tmp_path, "health").returncode == 1
    done = run(tmp_path, "health", "--json", AGENT_LINK_LOAD_PLUGINS="")  # not loaded here: only the log knows
    assert done.returncode == 1
    (problem,) = json.loads(done.stdout)["problems"]
    assert problem["plugin"] == "widget" and "in 2 other processes" in problem["message"], problem


@pytest.mark.anyio
async def test_the_health_tool_lists_a_broken_plugin_under_problems(tmp_path: Path) -> None:
    install(tmp_path, BROKEN["import"][0])
    async with agent_link_mcp({"PYTHONPATH": str(tmp_path), "AGENT_LINK_LOAD_PLUGINS": "widget"}) as client:
        health = await client.call("agent_link_health")
    assert health["ok"] is True  # the tool worked; what it found is in problems
    (problem,) = health["problems"]
    assert problem["plugin"] == "widget" and BROKEN["import"][1] in problem["message"], problem
    assert "widget" in health["plugins"]["failed"]
