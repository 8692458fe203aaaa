"""Helpers shared by the plugins' test suites: Apps with the installed plugins, calling a
tool as any caller, and running other suites while a plugin looks uninstalled."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.tools.registry import ToolCall, validate_arguments

REPO = Path(__file__).resolve().parents[2]
#: the marker expression of the unit tests (the Makefile's UNIT): no real host, no NATS server,
#: no nested run (the runs here are marked ``nested_suites``: ``make test-realhost`` runs them), no
#: wheel install (``packaging``)
UNIT_TESTS = "not realhost and not machines and not nested_suites and not packaging"

# A sitecustomize module: agent-link plugins named in AGENTLINK_TEST_UNINSTALLED lose their
# entry point and become unimportable, in the process and in every process it starts.
HIDER = '''
"""Test-only: agent-link plugins named in AGENTLINK_TEST_UNINSTALLED look uninstalled."""
import importlib.abc
import importlib.metadata as md
import os
import sys

_packages = {"agent_link_" + n.strip() for n in os.environ.get("AGENTLINK_TEST_UNINSTALLED", "").split(",") if n.strip()}
if _packages:
    _entry_points = md.entry_points

    def entry_points(**params):
        found = _entry_points(**params)
        if not params:
            return found
        return md.EntryPoints(ep for ep in found if ep.value.split(":")[0].split(".")[0] not in _packages)

    class _Uninstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in _packages:
                raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
            return None

    md.entry_points = entry_points
    sys.meta_path.insert(0, _Uninstalled())
'''

PROBE = """
import importlib, sys
from agent_link_core.plugins import plugins_of
print(",".join(sorted(plugins_of({}).loaded)))
try:
    importlib.import_module("agent_link_" + sys.argv[1])
except ModuleNotFoundError:
    print("hidden")
"""


def uninstalled_env(tmp_path: Path, plugin: str) -> dict[str, str]:
    """The environment of a process in which ``plugin`` looks uninstalled."""
    (tmp_path / "sitecustomize.py").write_text(HIDER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    env["AGENTLINK_TEST_UNINSTALLED"] = plugin  # not AGENT_LINK_*: the suites' conftest clears those
    return env


def loaded_plugins(env: dict[str, str], plugin: str) -> tuple[list[str], bool]:
    """What loads under ``env``, and whether ``plugin`` is unimportable there."""
    probe = subprocess.run([sys.executable, "-c", PROBE, plugin], env=env, cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    lines = probe.stdout.split()
    assert lines, probe.stderr
    return lines[0].split(","), lines[-1] == "hidden"


#: what a nested run leaves out besides :data:`UNIT_TESTS`: the core tests that load no installed
#: plugin (tests/conftest.py marks them), which pass or fail alike whatever is installed
CAN_SEE_PLUGINS = "not no_installed_plugins"


def run_suites(env: dict[str, str], suites: tuple[str, ...], basetemp: Path, deselect: tuple[str, ...] = (),
               ignore: tuple[str, ...] = (), timeout_s: float = 900) -> tuple[int, int, str]:
    """Run pytest on ``suites`` under ``env``, their unit tests only (:data:`UNIT_TESTS`) that
    can see which plugins are installed
    (:data:`CAN_SEE_PLUGINS`); returns ``(exit code, tests passed, output tail)``.

    ``basetemp`` keeps the nested run's temporary files apart: left to itself, pytest would
    prune the oldest numbered temp dirs, which may be the outer run's own.
    """
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}",
            "-m", f"({UNIT_TESTS}) and {CAN_SEE_PLUGINS}", *[s for s in suites if (REPO / s).exists()]]
    args += [f"--deselect={d}" for d in deselect] + [f"--ignore={i}" for i in ignore]
    run = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    passed = int(run.stdout.rsplit(" passed", 1)[0].split()[-1]) if " passed" in run.stdout else 0
    return run.returncode, passed, tail


# What runs while one of the optional plugins is hidden: the core's plugin-facing files, the
# codex unit tests and the other optional plugin's suite (the whole core suite takes minutes).
CORE_SUITES = (
    "tests/test_plugins.py", "tests/test_hookspecs.py", "tests/test_cli.py", "tests/test_mailbox.py",
    "tests/test_hook.py", "tests/test_host_neutral.py", "tests/test_config.py",
    "plugins/codex/tests/test_appserver_client.py",
)
ASSUME_ALL_INSTALLED = (  # these assert that every plugin, or one they name, is installed
    "tests/test_plugins.py::test_installed_plugins_load_and_can_be_disabled",
    "tests/test_plugins.py::test_a_test_loads_only_the_installed_plugins_it_names",
    "tests/test_cli.py::test_health_json_is_one_object",
)


def check_suites_without(plugin: str, other: str, tmp_path: Path) -> None:
    """Assert that the core's plugin-facing suites and ``other``'s suite pass while
    ``plugin`` looks uninstalled (and that it really is hidden, and the suites really ran)."""
    env = uninstalled_env(tmp_path, plugin)
    loaded, hidden = loaded_plugins(env, plugin)
    assert plugin not in loaded and other in loaded and hidden
    code, passed, tail = run_suites(env, (*CORE_SUITES, f"plugins/{other}/tests"), tmp_path / "nested",
                                    ASSUME_ALL_INSTALLED, ignore=(f"plugins/{other}/tests/test_{other}_uninstalled.py",))
    assert code == 0, tail
    assert passed >= 80, tail


@contextmanager
def app_factory(monkeypatch: Any, disabled: str = "codex claude") -> Iterator[Callable[..., App]]:
    """``make(**env)``: Apps of the installed plugins (``disabled`` ones off) with ``env`` set
    in the process environment; all closed at exit."""
    apps: list[App] = []

    def make(**env: str) -> App:
        monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", disabled)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app = App.create()
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


async def call_tool(app: App, name: str, args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    """A tool's result object as ``caller``, arguments validated as the MCP layer does, errors
    as ``{"ok": False, "error": ...}``."""
    spec = app.hooks.tools()[name]
    try:
        validated, warnings = validate_arguments(spec, args)
        fields = await spec.handler(app, validated, ToolCall({}, caller, warnings))
    except AgentLinkError as exc:
        return {"ok": False, "error": exc.to_dict()}
    return {"ok": True, **fields}
