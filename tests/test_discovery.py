"""The entry-point cache of the console script (:mod:`agent_link_core.discovery`).

* In a process, with the cache on: the same entry points as :mod:`importlib.metadata`, read
  from the cache while the fingerprint holds, scanned again when a folder on ``sys.path``
  or a plugin's ``entry_points.txt`` changed.
* Through ``python -m agent_link_core``: installing, removing or rewriting a plugin
  distribution is seen by the very next command.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import discovery
from agent_link_core.plugins import ENTRY_POINT_GROUP
from agent_link_testing.dists import install_dist

PLUGIN = '''
from agent_link_core.contribute import registers
from agent_link_core.config import Setting

agent_link_register_settings = registers([Setting("AGENT_LINK_{name}_ON", "flag", False, doc="test")])
'''


def scan() -> list[tuple[str, str, str | None]]:
    return sorted((ep.name, ep.value, ep.dist.version if ep.dist else None)
                  for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def cached(env: dict[str, str]) -> list[tuple[str, str, str | None]]:
    return sorted((ep.name, ep.value, ep.dist.version if ep.dist else None)
                  for ep in discovery.entry_points(ENTRY_POINT_GROUP, env))


def test_the_cache_answers_as_the_scan_does_until_the_environment_changes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    monkeypatch.setattr(discovery, "USE_CACHE", True)
    assert cached(env) == scan()  # the first call scans and writes the cache
    assert Path(discovery.cache_path(env)).is_file()

    def no_scan(**_: Any) -> Any:
        raise AssertionError("scanned although the cache holds")

    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", no_scan)
    assert cached(env) == scan_with(real)

    site = next(p for p in sys.path if os.path.isdir(p) and p.endswith("site-packages"))
    stat = os.stat(site)
    try:  # what installing a distribution into it does to the folder
        os.utime(site, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        with pytest.raises(AssertionError, match="scanned"):
            cached(env)
    finally:
        os.utime(site, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def scan_with(entry_points: Any) -> list[tuple[str, str, str | None]]:
    return sorted((ep.name, ep.value, ep.dist.version if ep.dist else None)
                  for ep in entry_points(group=ENTRY_POINT_GROUP))


def test_a_damaged_cache_is_scanned_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    monkeypatch.setattr(discovery, "USE_CACHE", True)
    path = Path(discovery.cache_path(env))
    path.parent.mkdir(parents=True)
    for text in ("not json", json.dumps({ENTRY_POINT_GROUP: {"fingerprint": discovery.fingerprint([]), "files": [],
                                                             "entry_points": [["only-two"]]}})):
        path.write_text(text)
        assert cached(env) == scan()


def plugins_json(site: Path, home: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(site), AGENT_LINK_LOAD_PLUGINS="one two", XDG_CACHE_HOME=str(home))
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "plugins", "--json"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_console_script_sees_a_plugin_installed_removed_or_rewritten_at_once(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    one = install_dist(site, "agent_link_one", {"plugin.py": PLUGIN.format(name="ONE")}, entry_name="one",
                       entry_module="agent_link_one.plugin")
    first = plugins_json(site, cache)
    assert "one" in first["loaded"] and first["versions"]["one"] == "0.1"
    assert list(cache.glob("agent-link/entry-points/*.json"))
    assert plugins_json(site, cache)["loaded"] == first["loaded"]  # read from the cache

    shutil.rmtree(one)  # uninstalled
    assert "one" not in plugins_json(site, cache)["loaded"]

    two = install_dist(site, "agent_link_two", {"plugin.py": PLUGIN.format(name="TWO")}, entry_name="two",
                       entry_module="agent_link_two.plugin")
    assert "two" in plugins_json(site, cache)["loaded"]

    # the entry point rewritten in place (its folder and the site keep their times)
    (two / "entry_points.txt").write_text("[agent_link]\ntwo = agent_link_two.missing\n")
    after = plugins_json(site, cache)
    assert "two" not in after["loaded"] and "two" in after["failed"]
