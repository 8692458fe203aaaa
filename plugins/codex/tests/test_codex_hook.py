"""The Codex prompt hook: adapter rules, the real `agent-link hook codex UserPromptSubmit` command,
the shell shim, and the shipped declarations (plugin manifest, hooks file, marketplace)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


from agent_link_codex.hook import handle
from agent_link_core.config import load_config
from agent_link_core.hook import HookContext
from agent_link_core.mailbox import Mailbox, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import Store, now_ms
from agent_link_testing.codex_host import REPO_ROOT

TID = "01a22a93-0000-7000-8000-0000000000bb"
ADDRESS = f"codex:{TID}"
PAYLOAD = {"session_id": TID, "turn_id": "t1", "transcript_path": "/x.jsonl", "cwd": "/w", "hook_event_name": "UserPromptSubmit",
           "model": "m", "permission_mode": "bypassPermissions", "prompt": "go"}


def seed(senders: list[str], *, delivered_ago_ms: int | None = None, body: str = "SECRET BODY") -> list[str]:
    config = load_config()
    box = Mailbox(Store(config.db_path), config)
    ids = []
    for sender in senders:
        row, _ = box.store_message(OutgoingMessage(new_message_id(), Caller(sender, "config", "test"), ADDRESS, ADDRESS, body,
                                                   "reply", None, None))
        ids.append(row["id"])
        if delivered_ago_ms is not None:
            at = now_ms() - delivered_ago_ms
            with box.store.write() as conn:
                conn.execute("UPDATE messages SET sent_at = ?, delivered_at = ?, first_delivered_at = ? WHERE id = ?", (at, at, at, row["id"]))
    box.store.close()
    return ids


def run(payload: dict | str) -> dict | None:
    return handle("UserPromptSubmit", payload if isinstance(payload, dict) else json.loads(payload), HookContext(load_config()))


def test_silent_without_mail_and_for_bad_input(isolated_env: Path) -> None:
    assert run(PAYLOAD) is None  # no database yet
    seed(["test:alice"])
    for bad in ({**PAYLOAD, "session_id": ""}, {**PAYLOAD, "session_id": "a:b"}, {**PAYLOAD, "session_id": 7},
                {k: v for k, v in PAYLOAD.items() if k != "session_id"}, {**PAYLOAD, "hook_event_name": "Stop"}):
        assert run(bad) is None, bad
    assert handle("SessionStart", PAYLOAD, HookContext(load_config())) is None
    assert run({**PAYLOAD, "session_id": "01a22a93-0000-7000-8000-0000000000cc"}) is None  # mail is for another thread


def test_pending_note_never_a_body_and_marks_nothing(isolated_env: Path) -> None:
    seed(["test:a", "test:b", "test:c", "test:d", "test:e"])
    out = run(PAYLOAD)
    assert out is not None and set(out) == {"hookSpecificOutput"}
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "UserPromptSubmit"
    note = spec["additionalContext"]
    assert "5 peer messages are waiting" in note and "(+2 more)" in note and "read_agent_link_inbox" in note
    assert "SECRET BODY" not in note
    assert run(PAYLOAD) == out  # repeats while the mail is unread: nothing was marked delivered


def test_due_reminders_are_claimed_once(isolated_env: Path) -> None:
    [mid] = seed(["test:alice"], delivered_ago_ms=60_000)
    out = run(PAYLOAD)
    assert out is not None and "reminder 1 of 3" in out["hookSpecificOutput"]["additionalContext"]
    assert run(PAYLOAD) is None  # reminder 1 is taken; reminder 2 is due only one interval later
    config = load_config()
    rows = Store(config.db_path).conn.execute("SELECT n, via, to_addr FROM reminders WHERE message_id = ?", (mid,)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "codex-prompt-hook", ADDRESS)]


def hook_command(stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).with_name("agent-link"))
    return subprocess.run([exe, "hook", "codex", "UserPromptSubmit"], input=stdin, capture_output=True, text=True, env=env, timeout=30)


def test_the_real_command_output_and_fail_open(isolated_env: Path) -> None:
    seed(["test:alice"])
    done = hook_command(json.dumps(PAYLOAD), dict(os.environ))
    assert done.returncode == 0 and done.stdout.endswith("\n")
    assert json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"].startswith("agent-link: 1 peer message is waiting")
    for stdin in ("{not json", "[]", ""):
        broken = hook_command(stdin, dict(os.environ))
        assert (broken.returncode, broken.stdout) == (0, ""), stdin
    (isolated_env / "agent-link.db").write_bytes(b"this is not a database")
    corrupt = hook_command(json.dumps(PAYLOAD), dict(os.environ))
    assert (corrupt.returncode, corrupt.stdout) == (0, "")


def test_shim_finds_agent_link_and_fails_open_without_it(isolated_env: Path, tmp_path: Path) -> None:
    seed(["test:alice"])
    shim = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / "hooks" / "agent-link.sh"
    env = {**os.environ, "AGENT_LINK_BIN": str(Path(sys.executable).with_name("agent-link")), "PLUGIN_ROOT": str(tmp_path)}
    done = subprocess.run(["sh", str(shim), "hook", "codex", "UserPromptSubmit"], input=json.dumps(PAYLOAD), capture_output=True,
                          text=True, env=env, timeout=30)
    assert done.returncode == 0 and "1 peer message is waiting" in done.stdout
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PLUGIN_ROOT": str(tmp_path)}
    missing = subprocess.run(["sh", str(shim), "hook", "codex", "UserPromptSubmit"], input=json.dumps(PAYLOAD), capture_output=True,
                             text=True, env=bare, timeout=30)
    assert (missing.returncode, missing.stdout) == (0, "")


def test_hook_adapter_imports_stay_light() -> None:
    probe = "import sys, agent_link_codex.hook; print(sorted(m for m in ('websockets', 'pluggy', 'mcp', 'click', 'typing', 'pathlib', 'agent_link_codex.appserver') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "[]", done.stderr


def test_shipped_declarations() -> None:
    folder = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin"
    manifest = json.loads((folder / ".codex-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "codex-agent-link" and manifest["hooks"] == "./hooks/codex-hooks.json"
    hooks = json.loads((folder / manifest["hooks"]).read_text())["hooks"]
    assert set(hooks) == {"UserPromptSubmit", "PreToolUse"}
    [group] = hooks["UserPromptSubmit"]
    [hook] = group["hooks"]
    assert hook["type"] == "command" and hook["timeout"] == 5
    assert hook["command"] == 'sh "${PLUGIN_ROOT}/hooks/agent-link.sh" hook codex UserPromptSubmit'
    # the lease guard (agent-link-leases; silent when that plugin is not installed): patches
    # and shell commands only, never reads
    [guard_group] = hooks["PreToolUse"]
    [guard] = guard_group["hooks"]
    assert guard_group["matcher"] == "^(apply_patch|Bash)$" and guard["timeout"] == 5
    assert guard["command"] == 'sh "${PLUGIN_ROOT}/hooks/agent-link.sh" hook leases CodexPreToolUse'
    mcp = json.loads((folder / manifest["mcpServers"]).read_text())["mcpServers"]
    assert mcp["codex-agent-link"]["args"] == ["./hooks/agent-link.sh", "mcp"] and mcp["codex-agent-link"]["env"] == {"AGENT_LINK_HOST": "codex"}
    market = json.loads((REPO_ROOT / ".agents" / "plugins" / "marketplace.json").read_text())
    assert [p["name"] for p in market["plugins"]] == ["codex-agent-link"] and market["plugins"][0]["source"]["path"] == "./plugins/codex/agent_link_codex/host_plugin"
