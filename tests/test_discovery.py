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

    def no_scan(*_: Any, **__: Any) -> Any:
        raise AssertionError("scanned although the cache holds")

    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", no_scan)
    monkeypatch.setattr(discovery, "_dist_info_entry_points", no_scan)  # the scan without importlib.metadata
    assert cached(env) == scan_with(real)

    site = next(p for p in sys.path if os.path.isdir(p) and p.endswith("site-packages"))
    dist = next(str(p) for p in Path(site).iterdir() if p.name.endswith(".dist-info"))
    stat = os.stat(dist)
    try:  # what reinstalling a distribution does to its folder
        os.utime(dist, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        with pytest.raises(AssertionError, match="scanned"):
            cached(env)
    finally:
        os.utime(dist, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_files_coming_and_going_in_a_folder_on_the_path_keep_the_cache(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy current directory (``python -m`` puts it on ``sys.path``) holds no distribution: no new scan."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    busy = tmp_path / "busy"
    busy.mkdir()
    monkeypatch.syspath_prepend(str(busy))
    monkeypatch.setattr(discovery, "USE_CACHE", True)
    assert cached(env) == scan()

    def no_scan(*_: Any, **__: Any) -> Any:
        raise AssertionError("scanned although no distribution changed")

    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", no_scan)
    monkeypatch.setattr(discovery, "_dist_info_entry_points", no_scan)  # the scan without importlib.metadata
    (busy / "notes.txt").write_text("x")
    (busy / "sub").mkdir()
    assert cached(env) == scan_with(real)
    (busy / "agent_link_new-0.1.dist-info").mkdir()  # a distribution installed there: scanned again
    with pytest.raises(AssertionError, match="scanned"):
        cached(env)


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


def test_the_cache_keeps_each_group_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugins' group and the start-up front's share one file: reading one does not drop the other."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    monkeypatch.setattr(discovery, "USE_CACHE", True)
    plugins = scan()
    assert cached(env) == plugins
    fronts = sorted(ep.name for ep in discovery.entry_points(discovery.FRONT_GROUP, env))
    assert fronts == sorted(ep.name for ep in importlib.metadata.entry_points(group=discovery.FRONT_GROUP))
    assert set(json.loads(Path(discovery.cache_path(env)).read_text())) == {ENTRY_POINT_GROUP, discovery.FRONT_GROUP}

    def no_scan(*_: Any, **__: Any) -> Any:
        raise AssertionError("scanned although the cache holds")

    monkeypatch.setattr(importlib.metadata, "entry_points", no_scan)
    monkeypatch.setattr(discovery, "_dist_info_entry_points", no_scan)  # the scan without importlib.metadata
    assert cached(env) == plugins  # both read from the cache
    assert sorted(ep.name for ep in discovery.entry_points(discovery.FRONT_GROUP, env)) == fronts


class Declared:
    """An entry point of the front's group whose ``load()`` gives ``front`` (or raises it)."""

    def __init__(self, name: str, front: Any) -> None:
        self.name, self.value, self.front = name, f"front_{name}", front

    def load(self) -> Any:
        if isinstance(self.front, BaseException):
            raise self.front
        return self.front


class Front:
    """A front with the four calls."""

    def start(self) -> None: ...
    def stdio_server(self) -> None: ...
    def stop_learning(self) -> None: ...
    def finish(self) -> None: ...


@pytest.mark.parametrize(("declared", "said"), [
    ([], None),
    ([Declared("broken", SystemExit(3))], "SystemExit: 3"),
    ([Declared("broken", ImportError("no module named front_broken"))], "ImportError: no module named front_broken"),
    ([Declared("partial", object())], "it has no start, stdio_server, stop_learning, finish"),
], ids=["none-declared", "raises-systemexit", "import-fails", "lacks-calls"])
def test_no_usable_front_serves_without_one(declared: list[Declared], said: str | None, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(discovery, "_front", [])
    monkeypatch.setattr(discovery, "entry_points", lambda group: declared if group == discovery.FRONT_GROUP else [])
    assert discovery.mcp_front() is None
    err = capsys.readouterr().err
    if said is None:
        assert err == ""
    else:
        assert err.startswith(f"agent-link: the MCP start-up front {declared[0].name!r}") and said in err, err
        assert err.count("\n") == 1


def test_the_first_declared_front_is_loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = Front(), Front()
    loads: list[str] = []

    class Counted(Declared):
        def load(self) -> Any:
            loads.append(self.name)
            return super().load()

    monkeypatch.setattr(discovery, "_front", [])
    monkeypatch.setattr(discovery, "entry_points", lambda group: [Counted("zz", second), Counted("aa", first)])
    assert discovery.mcp_front() is first
    assert discovery.mcp_front() is first
    assert loads == ["aa"]


def test_a_front_that_fails_to_start_is_not_used(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    started: list[str] = []

    class Failing(Front):
        def start(self) -> None:
            started.append("failing")
            raise SystemExit(2)

    monkeypatch.setattr(discovery, "_front", [])
    monkeypatch.setattr(discovery, "entry_points", lambda group: [Declared("failing", Failing())])
    assert discovery.mcp_front(start=True) is None
    assert discovery.mcp_front() is None  # the server then serves over the SDK's transport
    assert started == ["failing"]
    assert "'failing' (front_failing) is not used: SystemExit: 2" in capsys.readouterr().err


def test_a_working_front_is_started_once(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    class Working(Front):
        def start(self) -> None:
            started.append("working")

    front = Working()
    monkeypatch.setattr(discovery, "_front", [])
    monkeypatch.setattr(discovery, "entry_points", lambda group: [Declared("working", front)])
    assert discovery.mcp_front(start=True) is front
    assert discovery.mcp_front() is front
    assert started == ["working"]


def test_the_start_up_work_of_each_loaded_plugin_runs_in_name_order_and_a_failing_one_is_said(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``agent_link_mcp_start`` (the presence plugin's start-up record): every declared callable runs, by name, unless
    its plugin is disabled or not loaded; one that fails to load or raises is one stderr line, and the rest still run."""
    ran: list[str] = []

    def work(name: str) -> Any:
        return lambda: ran.append(name)

    def failing() -> None:
        raise RuntimeError("no database")

    declared = [Declared("zz", work("zz")), Declared("bad", failing), Declared("aa", work("aa")),
                Declared("gone", ImportError("no module named gone")), Declared("off", work("off"))]
    monkeypatch.setattr(discovery, "entry_points", lambda group: declared if group == discovery.START_GROUP else [])
    discovery.mcp_start({"AGENT_LINK_DISABLE_PLUGINS": "off"})
    assert ran == ["aa", "zz"]
    err = capsys.readouterr().err.splitlines()
    assert err == ["agent-link: the MCP start-up work 'bad' (front_bad) failed: RuntimeError: no database",
                   "agent-link: the MCP start-up work 'gone' (front_gone) failed: ImportError: no module named gone"]
    ran.clear()
    discovery.mcp_start({"AGENT_LINK_LOAD_PLUGINS": "zz, off"})  # as the plugins load: only those named
    assert ran == ["off", "zz"] and capsys.readouterr().err == ""


def test_the_scan_reads_what_importlib_metadata_finds_without_importing_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is rebuilt from the ``*.dist-info``/``*.egg-info`` folders themselves (a first command in a new cache
    dir imported importlib.metadata for it, 20 ms): the same entry points, in the same order, with the same versions;
    a zip on ``sys.path``, which only importlib.metadata reads, leaves it to importlib.metadata."""
    site = tmp_path / "site"
    site.mkdir()
    install_dist(site, "agent_link_scanned", {"plugin.py": PLUGIN.format(name="SCANNED")}, entry_name="scanned",
                 entry_module="agent_link_scanned.plugin")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    for group in (ENTRY_POINT_GROUP, discovery.FRONT_GROUP, "console_scripts"):
        found = discovery._dist_info_entry_points(group)
        assert found is not None
        assert [(ep.name, ep.value, ep.dist and ep.dist.version) for ep in found[0]] == \
               [(ep.name, ep.value, ep.dist and ep.dist.version) for ep in importlib.metadata.entry_points(group=group)]
    assert "scanned" in [ep.name for ep in discovery._dist_info_entry_points(ENTRY_POINT_GROUP)[0]]
    archive = tmp_path / "eggs.zip"
    shutil.make_archive(str(archive.with_suffix("")), "zip", site)
    monkeypatch.syspath_prepend(str(archive))
    assert discovery._dist_info_entry_points(ENTRY_POINT_GROUP) is None
