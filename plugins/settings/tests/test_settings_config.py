"""``agent-link config get|set|unset|list`` (agent_link_settings.cli): edits the settings file
the core reads, refuses what no process would accept, and keeps the document's other keys."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_link_testing.settings_file import cli, settings_file


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Path:
    return settings_file(monkeypatch)


def test_config_set_get_unset_keep_the_rest(settings: Path, tmp_path: Path) -> None:
    settings.write_text("[mine]\nkeep = 1\n")
    box = tmp_path / "box"
    assert cli("config", "set", "state_dir", str(box)).returncode == 0
    assert cli("config", "set", "AGENT_LINK_INSPECT_ALL", "yes").returncode == 0
    text = settings.read_text()
    assert f'state_dir = "{box}"' in text and "inspect_all = true" in text and "[mine]" in text and "keep = 1" in text
    assert oct(settings.stat().st_mode & 0o777) == "0o600"
    got = json.loads(cli("config", "get", "state_dir", "--json").stdout)
    assert got == {"version": 1, "name": "AGENT_LINK_STATE_DIR", "value": str(box), "source": "settings-file"}
    listed = json.loads(cli("config", "list", "--json").stdout)
    assert {"AGENT_LINK_STATE_DIR", "AGENT_LINK_INSPECT_ALL"} <= {row["name"] for row in listed["settings"]}
    assert cli("config", "unset", "inspect_all").returncode == 0
    assert "inspect_all" not in settings.read_text() and "keep = 1" in settings.read_text()
    # config says where the database lives; it opens none (no state dir at the default place)
    assert not (Path(os.environ["HOME"]) / ".agent-link").exists() and not box.exists()
    # the CLI uses it: a message sent lands in the file's state dir
    assert cli("send", "team:bob", "hi", env={**os.environ, "AGENT_LINK_ADDRESS": "team:alice"}).returncode == 0
    assert (box / "agent-link.db").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (("set", "no_such_thing", "1"), "no agent-link setting"),
    (("set", "state_dir", "relative/path"), "absolute path"),
    (("set", "reminder_limit", "99"), "cannot be '99': expected a whole number from 0 to 20"),
    (("set", "inspect_all", "maybe"), "1/true/yes/on"),
    (("get", "nope"), "no agent-link setting"),
    # empty is read as unset: writing it would pin the default (or nothing) without a word
    (("set", "reminder_limit", ""), "AGENT_LINK_REMINDER_LIMIT cannot be empty: `agent-link config unset"),
    (("set", "inspect_all", " "), "cannot be empty"),
    (("set", "state_dir", ""), "cannot be empty"),
])
def test_config_refuses_what_no_process_would_accept(settings: Path, args: tuple[str, ...], needle: str) -> None:
    done = cli("config", *args)
    assert done.returncode != 0 and needle in done.stderr and "Traceback" not in done.stderr
    assert "expected ." not in done.stderr and "`agent-link config list`" in done.stderr or "Nothing was written" in done.stderr
    assert not settings.exists() and not (Path(os.environ["HOME"]) / ".agent-link").exists()


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("AGENT_LINK_DISABLE_PLUGINS", "codex,nosuch", "AGENT_LINK_DISABLE_PLUGINS cannot name 'nosuch': expected items of "),
    ("load_plugins", "nosuch", "AGENT_LINK_LOAD_PLUGINS cannot name 'nosuch': expected items of "),
    ("host", "nosuch", "AGENT_LINK_HOST cannot name 'nosuch': expected "),
    ("tools", "messaging nosuch", "AGENT_LINK_TOOLS cannot name 'nosuch': expected items of all, messaging, "),
])
def test_config_set_refuses_a_name_nothing_installed_has(settings: Path, name: str, value: str, needle: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin, host or tool profile that is not installed would be ignored by every process:
    one line naming the known values (every installed plugin's, whatever
    AGENT_LINK_LOAD_PLUGINS leaves out), exit 1, nothing written."""
    pytest.importorskip("agent_link_codex")
    if name == "tools":  # AGENT_LINK_TOOLS is the profiles plugin's
        pytest.importorskip("agent_link_profiles")
        monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "settings profiles")
    done = cli("config", "set", name, value)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and needle in done.stderr, done.stderr
    assert "codex" in done.stderr and done.stderr.rstrip().endswith("Nothing was written.")
    assert not settings.exists()


@pytest.mark.parametrize(("name", "value"), [("disable_plugins", "codex web"), ("load_plugins", ""), ("host", "codex"),
                                             ("tools", "messaging,codex,list_agents")])
def test_config_set_takes_installed_names(settings: Path, name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agent_link_codex")
    if name == "tools":  # AGENT_LINK_TOOLS is the profiles plugin's
        pytest.importorskip("agent_link_profiles")
        monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "settings profiles")
    assert cli("config", "set", name, value).returncode == 0


def test_a_refused_value_in_the_file_is_said_and_not_shown_as_the_files(settings: Path) -> None:
    """config get/list still show every setting, say the refused one on stderr (variable, value,
    what is allowed), and never claim the default came from the file; other commands refuse."""
    settings.write_text('reminder_limit = "many"\n')
    got = cli("config", "get", "reminder_limit")
    assert got.returncode == 0 and got.stdout == "3\t(default)\n"
    assert cli("config", "get", "address").stdout == "(not set)\t(default)\n"  # not a bare tab
    assert "AGENT_LINK_REMINDER_LIMIT = 'many' in the settings file" in got.stderr
    assert "expected a whole number from 0 to 20" in got.stderr
    listed = cli("config", "list", "--json")
    assert listed.returncode == 0 and "'many'" in listed.stderr
    sent = cli("send", "team:bob", "hi", env={**os.environ, "AGENT_LINK_ADDRESS": "team:alice"})
    assert sent.returncode == 1 and "'many'" in sent.stderr and "Traceback" not in sent.stderr


def test_config_list_never_prints_a_credential(settings: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret setting's value and the password or token of a URL are masked in ``list``
    (text and JSON), whether they come from the file or the environment; ``get`` prints
    the value asked for."""
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "settings,opencode,machines")
    assert cli("config", "set", "opencode_password", "hunter2").returncode == 0
    monkeypatch.setenv("AGENT_LINK_ENGINE_URL", "nats://agents:pa@ss/word@h1:4222,tls://t0ken@h2:4222,nats://h3:4222")
    monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", "http://me:pw@127.0.0.1:4096")
    text = cli("config", "list")
    rows = {row["name"]: row["value"] for row in json.loads(cli("config", "list", "--json").stdout)["settings"]}
    for secret in ("hunter2", "pa@ss", "word", "t0ken", ":pw@"):
        assert secret not in text.stdout + json.dumps(rows), secret
    assert rows["AGENT_LINK_OPENCODE_PASSWORD"] == "(hidden)"
    assert rows["AGENT_LINK_ENGINE_URL"] == "nats://agents:***@h1:4222,tls://***@h2:4222,nats://h3:4222"
    assert rows["AGENT_LINK_OPENCODE_SERVERS"] == "http://me:***@127.0.0.1:4096"
    assert [name for name, value in rows.items() if value == "(hidden)"] == ["AGENT_LINK_OPENCODE_PASSWORD"]
    assert cli("config", "get", "opencode_password").stdout.startswith("hunter2\t")


@pytest.mark.installed_plugins
def test_config_list_reports_a_broken_plugin_once(settings: Path, tmp_path: Path) -> None:
    """It loaded the plugins a second time for their settings, so a plugin failing to import was reported twice."""
    from agent_link_testing.dists import install_dist

    site = tmp_path / "site"
    install_dist(site, "agent_link_widget", {"plugin.py": 'raise RuntimeError("no config for the widget")\n'},
                 entry_name="widget", entry_module="agent_link_widget.plugin")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "AGENT_LINK_LOAD_PLUGINS": "widget settings"}
    done = cli("config", "list", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("no config for the widget") == 1, done.stderr
