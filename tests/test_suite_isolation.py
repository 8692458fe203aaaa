"""What the suites load is what the repository ships (the root conftest.py): a plugin suite's
test, and every ``agent-link`` process it starts, loads the repository's own plugins
(``AGENT_LINK_LOAD_PLUGINS`` = :func:`agent_link_testing.dists.repo_plugin_names`), never another
agent-link plugin that happens to be installed in the same environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_link_testing.dists import install_dist, repo_plugin_names


def loaded(env: dict[str, str]) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "plugins", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout)["loaded"])


def test_the_repository_plugins_are_the_ones_its_folders_declare() -> None:
    names = repo_plugin_names()
    assert {"codex", "claude", "opencode", "roles", "receipts", "web", "settings", "filehost"} <= set(names)
    assert list(names) == sorted(set(names))


def test_a_plugin_installed_beside_the_repositorys_loads_only_where_nothing_is_pinned(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_dist(site, "agent_link_stray", {"plugin.py": '"""A plugin some other package installed."""\n'},
                 entry_name="stray", entry_module="agent_link_stray.plugin")
    env = {**os.environ, "PYTHONPATH": str(site), "AGENT_LINK_DISABLE_PLUGINS": "codex claude opencode"}
    env.pop("AGENT_LINK_LOAD_PLUGINS", None)
    assert "stray" in loaded(env)  # really installed: an unpinned process loads it
    suite = loaded({**env, "AGENT_LINK_LOAD_PLUGINS": " ".join(repo_plugin_names())})  # as a plugin suite's test runs
    assert "stray" not in suite and {"roles", "receipts", "web"} <= suite
