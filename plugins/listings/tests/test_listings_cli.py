"""``agent-link sessions``, ``who``, ``find``, ``contacts`` and ``watch`` (agent_link_listings) as
people and scripts use them: the core with this plugin, as the console script runs it (in this
process, or in a real process where the process itself is tested: ``watch``, a full device);
listings of live plain addresses and of a harness, contacts' rules, find's verdicts and exit
codes, watch's events, bad input as one line, and reads of a state dir that cannot be written."""

from __future__ import annotations

import functools
import json
import os
import selectors
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_link_listings import cli as listings_cli
from agent_link_testing.cli_plugins import add_cli_plugins
from agent_link_testing.cli_runner import AGENT_LINK, RUN_BOUND_S, core_env, core_process, invoke, run_core, run_main
from agent_link_testing.output import said_text
from agent_link_testing.harnesses import HarnessPlugin, ScriptedHarness
from tests.test_bad_configuration import unwritable

PLUGINS = ("listings",)
# the core with this plugin, as a script of the address --as / --from names; process: the same
# in a real agent-link process
run = functools.partial(run_core, plugins=PLUGINS)
process = functools.partial(core_process, plugins=PLUGINS)


def send_json(*args: str) -> dict[str, Any]:
    proc = run("send", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_sessions_and_who_list_live_plain_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "listings presence")  # the presence plugin keeps the plain addresses
    run = functools.partial(run_core, plugins=(*PLUGINS, "presence"))
    assert run("inbox", "--as", "team:bob").returncode == 0
    sessions = json.loads(run("sessions", "--json").stdout)
    assert sessions["version"] == 1 and [s["address"] for s in sessions["sessions"]] == ["team:bob"]
    assert "team:bob" in run("sessions").stdout
    who = json.loads(run("who", "--json").stdout)
    assert [s["address"] for s in who["sessions"]] == ["team:bob"]


BAD_ADDRESSES = ["Team:bob", "team:", ":bob", "team bob", "team:" + "b" * 200, "role:BAD", "a" * 40 + ":x"]
BAD_INPUT = [
    *[("watch", "--as", a) for a in BAD_ADDRESSES[::3]],
    *[("contacts", "add", "bob", a) for a in BAD_ADDRESSES[:2]],
    ("contacts", "add", "Bad Alias!", "team:bob"), ("contacts", "rename", "nobody", "x"), ("contacts", "remove", "nobody"),
    ("sessions", "--limit", "0"), ("sessions", "--limit", "x"), ("find", ""),
]


def test_bad_input_gets_one_line_never_a_traceback() -> None:
    """Fed malformed addresses, aliases and options: a non-zero exit and a last stderr line
    from agent-link (or click's usage error in agent-link's one line), never a traceback."""
    for args in BAD_INPUT:
        proc = run(*args)
        assert "Traceback" not in proc.stderr + proc.stdout and "failed unexpectedly" not in proc.stderr, proc.stderr
        assert proc.returncode != 0, (args, proc.stdout)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("agent-link"), (args, proc.stderr)
        assert not any(line.startswith(("Usage:", "Try ", "Error:")) for line in lines), (args, proc.stderr)


def test_an_error_names_the_commands_own_arguments() -> None:
    """A refused alias reads as the command's argument (its declaration names it: no table in the core)."""
    assert run("contacts", "add", "bob", "team:bob").returncode == 0 and run("contacts", "add", "carl", "team:carl").returncode == 0
    taken = run("contacts", "rename", "carl", "bob")
    assert taken.returncode == 2 and "agent-link contacts rename: NEW: expected an alias not already bound." in taken.stderr, taken.stderr
    assert "ALIAS: expected 1-64 of a-z" in run("contacts", "add", "Bad Alias!", "team:z").stderr
    assert "agent-link contacts rename: NEW: expected 1-64 of a-z" in run("contacts", "rename", "bob", "").stderr  # not --alias
    assert "agent-link contacts rename: OLD: expected 1-64 of a-z" in run("contacts", "rename", "", "bob").stderr
    assert "agent-link find: QUERY: expected" in run("find", " ").stderr


@pytest.mark.parametrize("args", [("sessions",), ("who",), ("contacts", "list")])
def test_every_json_is_one_versioned_object_and_ndjson_is_one_line(args: tuple[str, ...]) -> None:
    pretty = run(*args, "--json")
    assert pretty.returncode == 0, pretty.stderr
    assert "version" in json.loads(pretty.stdout)
    line = run(*args, "--ndjson")
    assert line.returncode == 0 and line.stdout.count("\n") == 1, line.stdout
    assert json.loads(line.stdout).keys() == json.loads(pretty.stdout).keys()
    for both in (("--json", "--ndjson"), ("--ndjson", "--json")):  # one format: the second one given refuses
        refused = run(*args, *both)
        assert refused.returncode == 2 and "choose one of --json and --ndjson" in refused.stderr, refused.stderr


def ctrl_c_works() -> None:
    """In the child before exec: SIGINT as a terminal's Ctrl-C delivers it (a suite started in
    the background of a shell without job control inherits SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_follows_new_mail_and_status_changes_until_interrupted() -> None:
    env = {**os.environ, **core_env((), {"AGENT_LINK_ADDRESS": "team:bob"}, PLUGINS)}
    watcher = subprocess.Popen([AGENT_LINK, "watch", "--as", "team:bob", "--ndjson", "--interval-ms", "200"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=ctrl_c_works)
    assert watcher.stdout is not None
    fd = watcher.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    pending = b""

    def next_event() -> dict[str, Any]:
        """The next line, read straight from the pipe (a buffered reader could hold a
        second line where select() no longer sees it)."""
        nonlocal pending
        while b"\n" not in pending:
            assert sel.select(timeout=RUN_BOUND_S), "watch printed nothing"
            chunk = os.read(fd, 65536)
            assert chunk, "watch ended early"
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        return json.loads(line)

    try:
        assert next_event() == {"version": 1, "event": "watching", "address": "team:bob"}
        mid = send_json("team:bob", "watch this \x1b[31m", "--from", "team:alice", "--anticipation", "reply")["messageId"]
        event = next_event()
        assert event["event"] == "message" and event["message"]["id"] == mid and event["message"]["status"] == "pending"
        assert run("reply", mid, "seen", "--from", "team:bob").returncode == 0
        events = [next_event(), next_event()]
        kinds = sorted((e["event"], e["message"]["from"]) for e in events)
        assert kinds == [("change", "team:alice"), ("message", "team:bob")]
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=RUN_BOUND_S)
    assert watcher.returncode == 0 and b"Traceback" not in err


# -- a harness's sessions -----------------------------------------------------------------


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> ScriptedHarness:
    h = ScriptedHarness("sx", ("ok", "busy", "lost", "quiet", "same"))
    add_cli_plugins(monkeypatch, HarnessPlugin(h, ScriptedHarness("sy", ("same", "only-y"))))
    return h


def out_json(result: Any) -> dict[str, Any]:
    return json.loads(result.stdout)


def test_sessions_json_hides_paths_and_reports_providers(harness: ScriptedHarness) -> None:
    data = out_json(invoke("sessions", "--json"))
    assert data["version"] == 1 and data["providers"]["sx"]["available"]
    assert {s["cwd"] for s in data["sessions"]} >= {"proj-ok", "proj-busy"}
    assert "/home/u" not in json.dumps(data)
    full = out_json(invoke("sessions", "--json", "--show-paths", "--search", "busy"))
    assert [s["address"] for s in full["sessions"]] == ["sx:busy"] and full["sessions"][0]["cwd"] == "/home/u/proj-busy"
    one_line = invoke("sessions", "--ndjson")
    assert one_line.stdout.count("\n") == 1 and json.loads(one_line.stdout)["version"] == 1
    assert invoke("sessions", "--limit", "501").exit_code == 2


def test_partial_listing_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    add_cli_plugins(monkeypatch, HarnessPlugin(ScriptedHarness("sz", ("x",), complete=False)))
    assert "sz: not fully listed" in invoke("sessions").stderr


def test_contacts_rules_and_alias_targets(harness: ScriptedHarness) -> None:
    assert invoke("contacts", "add", "  Builder ", "sx:ok").exit_code == 0
    listed = out_json(invoke("contacts", "list", "--json"))["contacts"]
    assert listed == [{"alias": "builder", "address": "sx:ok", "project": None, "label": None, "lastSeen": None}]
    taken = invoke("contacts", "add", "builder", "sx:quiet")
    assert taken.exit_code == 2 and "bound (to sx:ok)" in taken.stderr  # alias bound elsewhere; the reason is shown
    assert invoke("contacts", "add", "second", "sx:ok").exit_code == 2  # one alias per session
    assert invoke("contacts", "add", "bad alias!", "sx:quiet").exit_code == 2
    assert out_json(invoke("send", "BUILDER", "hi", "--from", "team:me", "--json"))["to"] == "sx:ok"
    assert out_json(invoke("contacts", "rename", "builder", "maker", "--json"))["alias"] == "maker"
    assert invoke("contacts", "remove", "builder").exit_code == 1
    assert invoke("contacts", "remove", "maker").exit_code == 0


def test_find_verdicts_and_who(harness: ScriptedHarness) -> None:
    invoke("contacts", "add", "builder", "sx:ok")
    one = invoke("find", "builder", "--json")
    assert one.exit_code == 0 and out_json(one)["verdict"] == "one"
    assert invoke("find", "zzz-nothing").exit_code == listings_cli.EXIT_NONE
    assert invoke("find", "title").exit_code == listings_cli.EXIT_MANY
    who = out_json(invoke("who", "--json"))
    mine = [s for s in who["sessions"] if s["address"] == "sx:ok"][0]
    assert mine["alias"] == "builder"
    assert out_json(invoke("contacts", "list", "--json"))["contacts"][0]["lastSeen"] is not None


def test_sessions_refuses_an_unknown_harness_naming_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "listings codex")
    result = invoke("sessions", "--harness", "nosuch")
    assert result.exit_code == 2 and "--harness: expected all or one of" in result.output and "codex" in result.output
    assert invoke("sessions", "--harness", "codex").exit_code == 0


def test_a_bad_cursor_is_not_given_a_timestamp_example() -> None:
    result = invoke("sessions", "--cursor", "garbage!!")
    assert result.exit_code == 2 and "the nextCursor of an earlier sessions answer." in result.output
    assert "2030" not in result.output


def test_sessions_json_carries_no_absolute_home_path_by_default(isolated_env: Path) -> None:
    """The Claude plugin reports the folders it searched (under HOME): home-relative by
    default, as they are with --show-paths."""
    home = os.environ["HOME"]
    claude = {"AGENT_LINK_LOAD_PLUGINS": "listings claude"}
    for command in (("sessions", "--json"), ("who", "--json")):
        done = run_main(*command, env=claude)
        assert done.returncode == 0, done.stderr
        assert home not in done.stdout and "~/.claude" in done.stdout, command
    shown = run_main("sessions", "--json", "--show-paths", env=claude)
    assert shown.returncode == 0
    assert any(p.startswith(home) for p in json.loads(shown.stdout)["providers"]["claude"]["searched"])


def test_home_relative_rewrites_only_paths_under_home() -> None:
    from agent_link_listings.listings import home_relative

    data = {"searched": ["/home/u/.claude", "/home/u", "/home/user2/x", "/etc/x"], "n": 3, "nested": [{"p": "/home/u/a b"}]}
    assert home_relative(data, "/home/u/") == {"searched": ["~/.claude", "~", "/home/user2/x", "/etc/x"], "n": 3,
                                               "nested": [{"p": "~/a b"}]}


# -- a state dir that cannot be written, or output that cannot be ---------------------------


def test_the_listings_read_an_unwritable_state_dir(isolated_env: Path) -> None:
    send_json("test:bob", "a note", "--from", "test:alice")
    before = sorted((p.name, p.stat().st_size) for p in isolated_env.iterdir())
    with unwritable(isolated_env):
        done = {args: process(*args, env={"AGENT_LINK_ADDRESS": "test:bob"})
                for args in (("sessions",), ("who",), ("watch", "--help"))}
        after = sorted((p.name, p.stat().st_size) for p in isolated_env.iterdir())
    for args, result in done.items():
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
    assert after == before  # nothing was written


def test_watch_help_says_what_its_ndjson_prints() -> None:
    """watch has no --json, so its --ndjson cannot be "the same JSON object on one line"."""
    said = " ".join(run("watch", "--help").stdout.split())
    assert "--ndjson Print each event as one JSON object per line" in said and "the same JSON object" not in said


def test_who_with_nothing_to_show_says_so() -> None:
    done = run("who")
    assert done.returncode == 0 and done.stdout.strip() == "No sessions or contacts found.", done.stdout


def test_who_lists_live_contacts_in_an_unwritable_state_dir(isolated_env: Path) -> None:
    """``who`` refreshes a live contact's folder and title on the way; a file that refuses
    writes leaves that for later instead of failing the listing."""
    assert run("inbox", "--as", "test:bob").returncode == 0  # test:bob read its mail: a live plain address
    assert run("contacts", "add", "bob", "test:bob").returncode == 0
    with unwritable(isolated_env):
        who = process("who", env={"AGENT_LINK_ADDRESS": "test:alice"})
    assert who.returncode == 0 and "bob" in who.stdout and "test:bob" in who.stdout, who.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_listing_whose_output_is_lost_says_one_line() -> None:
    with open("/dev/full", "w") as full:
        proc = process("sessions", stdout=full)
    assert proc.returncode == 1
    assert said_text(proc.stderr) == "agent-link: could not write the output (No space left on device).\n", proc.stderr


def test_readme_python_example_runs(tmp_path: Any) -> None:
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = re.search(r"### From Python.*?```python\n(.*?)```", readme, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(block)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("queued ") and lines[1] == "bob"


def test_an_unreachable_sources_words_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from agent_link_listings.cli import provider_lines

    provider_lines({"codex": {"complete": False, "reason": "app_server\a", "detail": "said \x1b]0;x\a\u202eevil\nforged",
                              "endpoints": [{"id": "ws\u202e1", "source": "env\x1b[2J", "reachable": False}]}})
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["agent-link: codex: not fully listed (app_server\\u{0007}: said \\u{001B}]0;x\\u{0007}\\u{202E}evil\\u{000A}forged)",
                     "agent-link: codex endpoint ws\\u{202E}1 (env\\u{001B}[2J) is unreachable"]


def test_contacts_an_earlier_core_kept_stay_and_name_their_sessions(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before this plugin owned it, the core made the ``contacts`` table (its migration 2): such a
    database keeps its contacts, and their aliases still name targets, once this plugin opens it."""
    import sqlite3

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "")
    assert run_core("inbox", "--as", "team:bob").returncode == 0  # the database, made by the core alone
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "listings")
    db = sqlite3.connect(isolated_env / "agent-link.db", isolation_level=None)
    with db:  # what the earlier core's migration 2 left
        db.execute("CREATE TABLE contacts (alias TEXT PRIMARY KEY, address TEXT NOT NULL UNIQUE, project TEXT, label TEXT,"
                   " last_seen INTEGER, created_at INTEGER NOT NULL)")
        db.execute("INSERT INTO contacts (alias, address, created_at) VALUES ('bob', 'team:bob', 1)")
        db.execute("INSERT INTO schema_migrations (owner, version, applied_at) VALUES ('core', 2, 1)")
    db.close()
    assert json.loads(run("contacts", "list", "--json").stdout)["contacts"][0]["address"] == "team:bob"
    assert send_json("bob", "hello", "--from", "team:alice")["to"] == "team:bob"
