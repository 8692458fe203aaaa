"""The hook fast path: fail-open, adapters registered through the plugin system (the prompt-hook
registry), notes without bodies, light imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_core.config import load_config
from agent_link_core.hook import HookContext
from agent_link_core.mailbox import Mailbox, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import Store
from agent_link_testing.dists import install_dist
from agent_link_testing.locks import hold_write_lock

# These tests install plugins of their own (a dist on PYTHONPATH) or check the installed ones.
pytestmark = pytest.mark.installed_plugins

ADAPTER = '''
"""A test host: its payload carries the recipient address directly."""

def handle(event, payload, ctx):
    address = payload.get("address", "")
    if event == "Prompt":
        note = ctx.pending_note(address)
        reminders = ctx.due_reminder_note(address, "testhost-prompt")
        text = "\\n".join(t for t in (note, reminders) if t)
        return {"context": text} if text else None
    if event == "Stop":  # a host that keeps a session going with a due reminder (as the claude plugin's Stop hook)
        reason = ctx.due_reminder_note(address, "testhost-stop") if ctx.mail_of(address)[1] else None
        return {"block": reason} if reason else None
    if event == "Crash":
        raise RuntimeError("adapter bug")
    return None
'''


PLUGIN = '''
from agent_link_core import hookimpl
from agent_link_core.records import PromptHook


@hookimpl
def agent_link_register_prompt_hooks(register):
    register(PromptHook("test-host", "agent_link_testhost.hook"))
'''


def install_plugin(site: Path, name: str = "test-host", package: str = "agent_link_testhost") -> Path:
    """Install the test-host plugin into ``site`` (hookimpls in ``plugin.py``, so importing the
    adapter keeps pluggy out); returns its dist-info folder."""
    return install_dist(site, package, {"plugin.py": PLUGIN, "hook.py": ADAPTER}, entry_name=name, entry_module=f"{package}.plugin")


@pytest.fixture
def adapter_path(tmp_path: Path) -> Path:
    """A folder on PYTHONPATH holding an installed plugin ``test-host`` (a hyphenated harness
    name) whose prompt-hook adapter is :data:`ADAPTER`."""
    install_plugin(tmp_path / "site")
    return tmp_path / "site"


def run_hook(adapter_path: Path, host: str, event: str, payload: object, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(adapter_path), **(extra_env or {}))
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run([sys.executable, "-m", "agent_link_core", "hook", host, event], input=stdin,
                          capture_output=True, text=True, env=env, timeout=30)


def seed(count: int, to: str = "test:bob", body: str = "SECRET BODY") -> Mailbox:
    config = load_config()
    box = Mailbox(Store(config.db_path), config)
    for i in range(count):
        sender = Caller(f"test:s{i}", "config", "test")
        box.store_message(OutgoingMessage(new_message_id(), sender, to, to, body, "reply", None, None))
    return box


def test_no_database_means_silence(adapter_path: Path, isolated_env: Path) -> None:
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert out.returncode == 0 and out.stdout == ""
    assert not (isolated_env / "agent-link.db").exists()  # the hook never creates state


def test_pending_note_lists_three_senders_and_no_body(adapter_path: Path) -> None:
    seed(5)
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert out.returncode == 0
    context = json.loads(out.stdout)["context"]
    assert "5" in context and "(+2 more)" in context
    assert "test:s0" in context and "test:s2" in context and "test:s3" not in context
    assert "SECRET BODY" not in context and "read_agent_link_inbox" in context


def test_hook_never_marks_delivered(adapter_path: Path) -> None:
    box = seed(1)
    run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert box.count_open("test:bob", undelivered_only=True) == 1


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"address": 5}'])
def test_bad_input_fails_open(adapter_path: Path, stdin: str) -> None:
    seed(1)
    out = run_hook(adapter_path, "test-host", "Prompt", stdin)
    assert out.returncode == 0 and out.stdout == ""


@pytest.mark.parametrize("stdin,said", [
    ("garbage", "stdin is not the host's hook JSON (not valid JSON: expecting value at line 1 column 1)"),
    ('{"address": ', "stdin is not the host's hook JSON (not valid JSON: expecting value at line 1 column 13)"),
])
def test_bad_input_is_said_in_words(adapter_path: Path, stdin: str, said: str) -> None:
    seed(1)
    out = run_hook(adapter_path, "test-host", "Prompt", stdin)
    assert out.returncode == 0 and said in out.stderr and "Error" not in out.stderr


def test_a_bad_setting_is_said_as_agent_link_says_it(adapter_path: Path) -> None:
    seed(1)
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"}, {"AGENT_LINK_DEBUG": "maybe"})
    assert "AGENT_LINK_DEBUG='maybe' is invalid" in out.stderr and "AgentLinkError" not in out.stderr


def test_adapter_crash_and_unknown_host_fail_open(adapter_path: Path) -> None:
    seed(1)
    crash = run_hook(adapter_path, "test-host", "Crash", {"address": "test:bob"})
    assert crash.returncode == 0 and crash.stdout == "" and "adapter bug" in crash.stderr
    unknown = run_hook(adapter_path, "nosuchhost", "Prompt", {"address": "test:bob"})
    assert unknown.returncode == 0 and unknown.stdout == ""
    weird = run_hook(adapter_path, "../etc", "Prompt", {"address": "test:bob"})
    assert weird.returncode == 0 and weird.stdout == ""


def test_disabled_plugin_adapter_is_not_loaded(adapter_path: Path) -> None:
    seed(1)
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"}, {"AGENT_LINK_DISABLE_PLUGINS": "test-host"})
    assert out.stdout == ""


def test_bad_setting_fails_open(adapter_path: Path) -> None:
    seed(1)
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"}, {"AGENT_LINK_STATE_DIR": "relative"})
    assert out.returncode == 0 and out.stdout == "" and "AGENT_LINK_STATE_DIR" in out.stderr


def test_heartbeat_recorded(adapter_path: Path, isolated_env: Path) -> None:
    seed(1)
    run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert int((isolated_env / "hooks" / "test-host-Prompt.last").read_text()) > 0  # epoch ms, for the host plugin's health


def test_hook_imports_stay_light(adapter_path: Path) -> None:
    seed(1)
    run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})  # the first run builds the registry
    probe = (
        "import sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules))))\n"
        "sys.argv = ['agent-link', 'hook', 'test-host', 'Prompt']\n"
        "from agent_link_core.entry import main\n"
        "main()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(adapter_path))
    out = subprocess.run([sys.executable, "-c", probe], input='{"address": "test:bob"}', capture_output=True, text=True, env=env, timeout=30)
    assert out.stdout  # the note was printed
    modules = set(out.stderr.split("MODULES ", 1)[1].split())
    # re (with enum) and the json package cost about half of a bare interpreter start; signal imports enum
    for heavy in ("mcp", "pydantic", "click", "pluggy", "jsonschema", "anyio", "re", "json", "enum", "signal"):
        assert heavy not in modules, f"the hook path imported {heavy}"


def test_mail_of_counts_undelivered_and_says_when_reminders_may_be_due(adapter_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core import mailbox as mailbox_mod

    box = seed(2)
    mid = box.open_for("test:bob", 1)[0]["id"]
    assert HookContext(load_config()).mail_of("test:bob") == (2, False)
    box.mark_delivered(mid, "test-push")
    # Pretend the delivery happened 31 s ago so a reminder is due now.
    box.store.conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (mid,))
    ctx = HookContext(load_config())
    assert ctx.mail_of("test:bob") == (1, True) and ctx.mail_of("not an address") == (0, False)
    reason = ctx.due_reminder_note("test:bob", "testhost-stop")
    assert reason and "1" in reason and "reply_agent_link_message" in reason
    assert ctx.due_reminder_note("test:bob", "testhost-stop") is None  # claimed once
    assert box.state(box.get_row(mid)).reminder_count == 1
    monkeypatch.setattr(mailbox_mod, "now_ms", lambda: 10**13)  # reminders are due there
    assert ctx.due_reminder_note("test:nobody", "x") is None


def hook_modules(adapter_path: Path, payload: dict[str, str], event: str = "Prompt") -> tuple[str, set[str]]:
    """The hook's stdout and the modules it had imported when it exited."""
    probe = (
        "import sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules))))\n"
        f"sys.argv = ['agent-link', 'hook', 'test-host', {event!r}]\n"
        "from agent_link_core.entry import main\n"
        "main()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(adapter_path))
    run_hook(adapter_path, "test-host", event, payload)  # the registry is built for this interpreter
    out = subprocess.run([sys.executable, "-c", probe], input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=30)
    run_again = subprocess.run([sys.executable, "-c", probe], input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=30)
    assert out.stdout == run_again.stdout
    return run_again.stdout, set(run_again.stderr.split("MODULES ", 1)[1].split())


MAILBOX_MODULES = ("agent_link_core.store", "agent_link_core.mailbox")


@pytest.mark.parametrize("event", ["Prompt", "Stop"])
def test_a_session_without_mail_loads_no_mailbox_however_full_the_database(adapter_path: Path, event: str) -> None:
    """issue 25: the mail of other sessions costs a prompt nothing: one lean read, no store,
    mailbox, envelope or reminders, and nothing printed."""
    box = seed(3, to="test:carol")
    delivered = box.open_for("test:carol", 1)[0]["id"]
    box.mark_delivered(delivered, "test-push")
    box.store.conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (delivered,))
    stdout, modules = hook_modules(adapter_path, {"address": "test:bob"}, event)
    assert stdout == ""
    for heavy in (*MAILBOX_MODULES, "agent_link_core.envelope"):
        assert heavy not in modules, f"a session without mail loaded {heavy}"


def test_undelivered_mail_is_noted_without_the_mailbox(adapter_path: Path) -> None:
    """The pending note is a read: worded by the envelope, read without the store, the
    mailbox or the sqlite3 package (its C module alone), and the same note the mailbox would give."""
    box = seed(4)
    stdout, modules = hook_modules(adapter_path, {"address": "test:bob"})
    from agent_link_core.envelope import pending_notice

    expected = pending_notice(4, ["test:s0", "test:s1", "test:s2", "test:s3"])
    assert json.loads(stdout)["context"] == expected
    assert box.count_open("test:bob", undelivered_only=True) == 4  # still undelivered
    for heavy in (*MAILBOX_MODULES, "sqlite3", "datetime"):  # the lean read is sqlite3's C module alone
        assert heavy not in modules, f"a note without reminders loaded {heavy}"


def test_a_due_reminder_still_goes_through_the_mailbox(adapter_path: Path) -> None:
    box = seed(1)
    mid = box.open_for("test:bob", 1)[0]["id"]
    box.mark_delivered(mid, "test-push")
    box.store.conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (mid,))
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert "remind" in json.loads(out.stdout)["context"].lower() and box.state(box.get_row(mid)).reminder_count == 1


def test_a_database_that_is_not_agent_links_is_refused_as_before(adapter_path: Path, isolated_env: Path) -> None:
    """When the lean read fails, the mailbox opens the file and says why (fail open)."""
    import sqlite3

    isolated_env.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(isolated_env / "agent-link.db")
    conn.execute("CREATE TABLE notes (x)")
    conn.close()
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert out.returncode == 0 and out.stdout == "" and "agent-link" in out.stderr and "tables" in out.stderr, out.stderr


def test_the_hook_never_creates_the_database(adapter_path: Path, isolated_env: Path) -> None:
    seed(1, to="test:carol")
    (isolated_env / "agent-link.db").unlink()
    for name in ("agent-link.db-wal", "agent-link.db-shm"):
        (isolated_env / name).unlink(missing_ok=True)
    out = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert out.returncode == 0 and out.stdout == ""
    assert not (isolated_env / "agent-link.db").exists()


def test_a_server_puts_back_an_adapter_a_hook_left_out(adapter_path: Path, isolated_env: Path) -> None:
    """A hook's rebuild runs each registration under a short budget; a plugin that only
    overran it there is put back by the next server, whose registrations had the full budget."""
    script = (
        "import json, sys\n"
        "from agent_link_core import hook\n"
        "from agent_link_core.json_files import read_json_object, write_json_object\n"
        "from agent_link_core.plugins import load_plugins\n"
        "state = sys.argv[1]\n"
        "path = hook.registry_path(state)\n"
        "current = hook.fingerprint(hook.disabled_names())\n"
        "write_json_object(path, {'fingerprint': current, 'adapters': {}})  # as a hook wrote it, its plugin left out\n"
        "hook.refresh_registry(state, load_plugins())\n"
        "print(json.dumps(read_json_object(path)['adapters']))\n"
    )
    isolated_env.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([sys.executable, "-c", script, str(isolated_env)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(adapter_path)), timeout=60)
    assert json.loads(out.stdout)["test-host"] == {"module": "agent_link_testhost.hook", "plugin": "test-host"}, out.stderr


def test_a_prompt_never_waits_for_another_writer_and_the_reminder_it_skips_comes_next_time(adapter_path: Path) -> None:
    box = seed(2)  # one delivered with a reminder due, one not delivered yet
    mid = box.open_for("test:bob", 1)[0]["id"]
    box.mark_delivered(mid, "test-push")
    # Pretend the delivery happened 31 s ago so a reminder is due now.
    box.store.conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (mid,))
    slow = {"AGENT_LINK_BUSY_TIMEOUT_MS": "600000"}  # a hook that waited for the lock would outlast the holder
    with hold_write_lock(box.store.path) as held:
        prompt = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"}, slow)
        stop = run_hook(adapter_path, "test-host", "Stop", {"address": "test:bob"}, slow)
        assert not held.waited, "the hook waited for another process's write lock"
    assert prompt.returncode == 0 and prompt.stderr == "", prompt.stderr
    context = json.loads(prompt.stdout)["context"]
    assert "test:s1" in context and "remind" not in context.lower()  # the mail note (a read) is shown, the claim is skipped
    assert stop.stdout == ""  # no block while the lock is taken
    assert box.state(box.get_row(mid)).reminder_count == 0  # nothing was claimed, so nothing is lost
    again = json.loads(run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"}, slow).stdout)["context"]
    assert "remind" in again.lower() and box.state(box.get_row(mid)).reminder_count == 1  # the next prompt shows it


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_reminder_whose_note_could_not_be_written_is_due_again(adapter_path: Path) -> None:
    """issue 29: the hook claims a reminder, then cannot write its note (the host went away, a
    full disk): the claim is given back, so the reminder is shown, and counted, next time."""
    box = seed(1)
    mid = box.open_for("test:bob", 1)[0]["id"]
    box.mark_delivered(mid, "test-push")
    # Pretend the delivery happened 31 s ago so a reminder is due now.
    box.store.conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (mid,))
    env = dict(os.environ, PYTHONPATH=str(adapter_path))
    with open("/dev/full", "w") as full:
        lost = subprocess.run([sys.executable, "-m", "agent_link_core", "hook", "test-host", "Prompt"], input='{"address": "test:bob"}',
                              stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=30)
    assert lost.returncode == 0 and lost.stderr == "agent-link hook: could not write the output (No space left on device)\n"
    assert box.state(box.get_row(mid)).reminder_count == 0 and box.has_event(mid, "reminder_unshown")
    shown = run_hook(adapter_path, "test-host", "Prompt", {"address": "test:bob"})
    assert "remind" in shown.stdout.lower() and box.state(box.get_row(mid)).reminder_count == 1


def test_a_ctrl_c_while_the_note_is_written_gives_the_reminder_back(adapter_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that lands while the hook writes its note (after it claimed a reminder) gives the claim back, as a
    failed write does, and the hook still fails open (found by review: only OSError gave it back)."""
    import io

    from agent_link_core import hook

    box = seed(1)
    mid = box.open_for("test:bob", 1)[0]["id"]
    box.mark_delivered(mid, "test-push")
    box.store.conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 31000 WHERE id = ?", (mid,))

    class Interrupted(io.StringIO):
        def write(self, text: str) -> int:
            raise KeyboardInterrupt

    monkeypatch.syspath_prepend(str(adapter_path))
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"address": "test:bob"}'))
    monkeypatch.setattr(sys, "stdout", Interrupted())
    assert hook.main(["test-host", "Prompt"]) == 0
    assert box.state(box.get_row(mid)).reminder_count == 0 and box.has_event(mid, "reminder_unshown")
