"""``agent-link hook leases PreToolUse`` end to end: the core's hook fast path runs the leases
adapter in a subprocess, which denies an edit of another session's exclusive lease, passes
everything else, stays silent when disabled, and imports nothing heavy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, claim

SESSION = "0f9e8d7c-aaaa-bbbb-cccc-000000000001"


def run_hook(payload: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_link_core", "hook", "leases", "PreToolUse"],
                          input=json.dumps(payload), capture_output=True, text=True, env={**os.environ, **env}, timeout=60)


def edit(repo: str, path: str, session: str = SESSION, tool: str = "Edit") -> dict[str, Any]:
    return {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": tool, "cwd": repo,
            "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}}


@pytest.fixture
def leased(app: App, repo: str) -> str:
    claim(app.store, "codex:thread-1", Project(repo, False), ["src/pkg"], exclusive=True, reason="splitting the module",
          ttl_ms=600_000, now=now_ms())
    claim(app.store, f"claude:{SESSION}", Project(repo, False), ["docs"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    return repo


def test_the_hook_denies_an_edit_of_anothers_lease(leased: str) -> None:
    out = run_hook(edit(leased, "src/pkg/mod.py"))
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny" and "codex:thread-1 holds src/pkg" in answer["permissionDecisionReason"]
    assert "splitting the module" in answer["permissionDecisionReason"]


@pytest.mark.parametrize("payload", [
    {"path": "docs/guide.txt"},  # the session's own lease
    {"path": "src/a.py"},  # nobody's
    {"path": "src/pkg/mod.py", "tool": "Read"},  # reads are never blocked
    {"path": "src/pkg/mod.py", "session": "not a valid id!"},  # no session named: no caller
])
def test_the_hook_passes(leased: str, payload: dict[str, str]) -> None:
    out = run_hook(edit(leased, payload["path"], payload.get("session", SESSION), payload.get("tool", "Edit")))
    assert (out.returncode, out.stdout) == (0, "")


def test_a_disabled_plugin_never_denies(leased: str) -> None:
    assert run_hook(edit(leased, "src/pkg/mod.py"), AGENT_LINK_DISABLE_PLUGINS="leases").stdout == ""
    assert run_hook(edit(leased, "src/pkg/mod.py")).stdout  # and back once enabled


def test_the_hook_imports_stay_light(leased: str) -> None:
    probe = (
        "import sys, atexit\n"
        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules))))\n"
        "sys.argv = ['agent-link', 'hook', 'leases', 'PreToolUse']\n"
        "from agent_link_core.entry import main\n"
        "main()\n"
    )
    run_hook(edit(leased, "src/pkg/mod.py"))  # the first run builds the adapter registry
    out = subprocess.run([sys.executable, "-c", probe], input=json.dumps(edit(leased, "src/pkg/mod.py")),
                         capture_output=True, text=True, timeout=60)
    assert "deny" in out.stdout
    modules = set(out.stderr.split("MODULES ", 1)[1].split())
    for heavy in ("mcp", "pydantic", "click", "pluggy", "jsonschema", "anyio"):
        assert heavy not in modules, f"the hook path imported {heavy}"


def test_no_state_means_silence(repo: str, isolated_env: Path) -> None:
    assert run_hook(edit(repo, "src/pkg/mod.py")).stdout == ""
    assert not (isolated_env / "agent-link.db").exists()
