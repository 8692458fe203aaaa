"""Plugin problems met by other agent-link processes (``<state>/plugin-problems.json``) are
listed by health and ``agent-link plugins`` (``elsewhere``) only while they can still matter:
a problem of a plugin that is no longer installed, or of another version of it than the one
installed now, is left out (the user removed or upgraded it: they expect it gone)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core import __version__, boundary, hookimpl
from agent_link_core import cli as cli_mod
from agent_link_core.boundary import CORE_PLUGIN
from agent_link_testing.cli_plugins import add_cli_plugins

OTHER_PID = 1  # init: never this test's process


def entry(plugin: str, version: str | None = None, **extra: Any) -> dict[str, Any]:
    out = {"plugin": plugin, "hook": "agent_link_tools", "error": f"{plugin} broke", "fix": "turn it off",
           "disabled": False, "at": int(time.time()), "pid": OTHER_PID, **extra}
    if version is not None:
        out["version"] = version
    return out


def write_log(entries: list[dict[str, Any]]) -> None:
    state = os.environ["AGENT_LINK_STATE_DIR"]
    os.makedirs(state, exist_ok=True)
    Path(state, boundary.PROBLEMS_FILE).write_text(json.dumps({"problems": entries}))


def test_only_installed_plugins_of_the_version_installed_are_listed(tmp_path: Path) -> None:
    state = str(tmp_path)
    Path(state, boundary.PROBLEMS_FILE).write_text(json.dumps({"problems": [
        entry("gone"), entry("kept"), entry("kept-v", "2.0"), entry("old-v", "1.0"), entry("unknown-v", "1.0"),
        entry("stale", at=int(time.time()) - boundary.RECENT_S - 60)]}))
    installed = {"kept": None, "kept-v": "2.0", "old-v": "2.0", "unknown-v": None, "stale": None}
    listed = boundary.recent_elsewhere(state, [], installed)
    assert [e["plugin"] for e in listed] == ["kept", "kept-v", "unknown-v"]
    assert boundary.read_problems(state)[0]["plugin"] == "gone"  # left out of the answer, not erased


def test_a_problem_records_the_plugins_version(tmp_path: Path) -> None:
    problem = {"plugin": "p", "hook": "h", "error": "e", "fix": "f", "disabled": False, "count": 1}
    boundary.append_problem(str(tmp_path), problem, "3.1")
    boundary.append_problem(str(tmp_path), {**problem, "error": "e2"})
    assert [e.get("version") for e in boundary.read_problems(str(tmp_path))] == ["3.1", None]


class Kept:
    @hookimpl
    def agent_link_register_tools(self, register: Any) -> None:
        return None


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> None:
    add_cli_plugins(monkeypatch, ("kept", Kept()))


@pytest.mark.parametrize("command", ["health", "plugins"])
def test_health_and_plugins_leave_out_an_uninstalled_plugins_problems(command: str, kept: None) -> None:
    write_log([entry("uninstalled-plugin"), entry("kept"), entry(CORE_PLUGIN, __version__),
               entry(CORE_PLUGIN, "0.0.0-older")])
    result = CliRunner().invoke(cli_mod.build_cli(), [command, "--json"], catch_exceptions=False)
    data = json.loads(result.stdout)
    elsewhere = (data["plugins"] if command == "health" else data)["elsewhere"]
    assert [(e["plugin"], e.get("version")) for e in elsewhere] == [("kept", None), (CORE_PLUGIN, __version__)]
    human = CliRunner().invoke(cli_mod.build_cli(), [command], catch_exceptions=False)
    assert "uninstalled-plugin" not in human.stdout and "kept broke" in human.stdout


def test_the_versions_recorded_are_the_installed_ones() -> None:
    from agent_link_core.plugins import plugins_of

    installed = plugins_of().installed()
    assert installed[CORE_PLUGIN] == __version__ and "not-a-plugin" not in installed
