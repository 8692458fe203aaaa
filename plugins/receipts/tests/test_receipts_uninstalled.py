"""The rest of agent-link works without the receipts plugin.

Runs a representative part of the core's suite, the codex plugin's unit tests and the roles
plugin's suite in a subprocess where agent-link-receipts looks uninstalled: a ``sitecustomize`` on
PYTHONPATH drops its entry point and makes ``agent_link_roles`` unimportable, in the pytest
process and in every process it starts (MCP servers, CLI). The whole core suite takes minutes,
so only its plugin-facing files run here; the deselected tests assert that all four plugins are
installed, which is exactly what this run takes away.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PLUGIN = "receipts"
SUITES = (
    "tests/test_plugins.py", "tests/test_hookspecs.py", "tests/test_cli.py", "tests/test_mailbox.py",
    "tests/test_hook.py", "tests/test_host_neutral.py", "tests/test_config.py",
    "plugins/codex/tests/test_appserver_client.py", "plugins/roles/tests",
)
DESELECT = (  # they assert that every plugin is installed
    "tests/test_plugins.py::test_installed_plugins_load_and_can_be_disabled",
    "tests/test_cli.py::test_health_json_is_one_object",
)
IGNORE = ("plugins/roles/tests/test_roles_uninstalled.py",)  # no nested suite runs

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
import importlib
from agent_link_core.plugins import build_plugin_manager
_, report = build_plugin_manager(env={})
print(",".join(sorted(report.loaded)))
try:
    importlib.import_module("agent_link_%s")
except ModuleNotFoundError:
    print("hidden")
"""


def without_plugin_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(HIDER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    env["AGENTLINK_TEST_UNINSTALLED"] = PLUGIN  # not AGENT_LINK_*: the suites' conftest clears those
    return env


def test_suites_pass_with_receipts_uninstalled(tmp_path: Path) -> None:
    env = without_plugin_env(tmp_path)
    probe = subprocess.run([sys.executable, "-c", PROBE % PLUGIN], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    loaded, hidden = probe.stdout.split()
    assert PLUGIN not in loaded.split(",") and "roles" in loaded.split(",") and hidden == "hidden", probe.stdout + probe.stderr

    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *[s for s in SUITES if (REPO / s).exists()]]
    args += [f"--deselect={d}" for d in DESELECT] + [f"--ignore={i}" for i in IGNORE]
    run = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    passed = int(run.stdout.rsplit(" passed", 1)[0].split()[-1])
    assert passed >= 100, tail  # the suites really ran
