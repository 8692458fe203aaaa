"""The rest of agent-link works without the roles plugin.

Runs a representative part of the core's suite, the codex plugin's unit tests and the receipts
plugin's suite in a subprocess where agent-link-roles looks uninstalled (its entry point dropped,
its package unimportable, in the pytest process and every process it starts). The whole core
suite takes minutes, so only its plugin-facing files run here; the deselected tests assert
that all four plugins are installed, which is exactly what this run takes away.
"""

from __future__ import annotations

from pathlib import Path

from agent_link_testing.plugin_suites import loaded_plugins, run_suites, uninstalled_env

SUITES = (
    "tests/test_plugins.py", "tests/test_hookspecs.py", "tests/test_cli.py", "tests/test_mailbox.py",
    "tests/test_hook.py", "tests/test_host_neutral.py", "tests/test_config.py",
    "plugins/codex/tests/test_appserver_client.py", "plugins/receipts/tests",
)
DESELECT = (  # they assert that every plugin is installed
    "tests/test_plugins.py::test_installed_plugins_load_and_can_be_disabled",
    "tests/test_cli.py::test_health_json_is_one_object",
)


def test_suites_pass_with_roles_uninstalled(tmp_path: Path) -> None:
    env = uninstalled_env(tmp_path, "roles")
    loaded, hidden = loaded_plugins(env, "roles")
    assert "roles" not in loaded and "receipts" in loaded and hidden
    code, passed, tail = run_suites(env, SUITES, tmp_path / "nested", DESELECT, ignore=("plugins/receipts/tests/test_receipts_uninstalled.py",))
    assert code == 0, tail
    assert passed >= 100, tail  # the suites really ran
