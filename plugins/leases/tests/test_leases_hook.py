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
from agent_link_leases.guard import EDIT_TOOLS, PATCH_TOOLS, SHELL_TOOLS
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


def test_the_codex_event_names_a_codex_thread(leased: str, app: App) -> None:
    thread = "01a232e1-ab89-7803-80e1-8bdc290e105a"
    patch = {"session_id": thread, "turn_id": "t1", "hook_event_name": "PreToolUse", "tool_name": "apply_patch", "cwd": leased,
             "tool_input": {"command": "*** Begin Patch\n*** Add File: src/pkg/new.py\n+x\n*** End Patch\n"}}
    out = subprocess.run([sys.executable, "-m", "agent_link_core", "hook", "leases", "CodexPreToolUse"], input=json.dumps(patch),
                         capture_output=True, text=True, timeout=60)
    assert "codex:thread-1 holds src/pkg" in json.loads(out.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    # the holder itself: its own Codex thread passes
    claim(app.store, f"codex:{thread}", Project(leased, False), ["src/mine"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    claim(app.store, "claude:other", Project(leased, False), ["src/theirs"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    own = {**patch, "tool_name": "Bash", "tool_input": {"command": "touch src/mine/x"}}
    assert subprocess.run([sys.executable, "-m", "agent_link_core", "hook", "leases", "CodexPreToolUse"], input=json.dumps(own),
                          capture_output=True, text=True, timeout=60).stdout == ""
    # an unknown event on the command line is not answered
    out = subprocess.run([sys.executable, "-m", "agent_link_core", "hook", "leases", "PostToolUse"], input=json.dumps(patch),
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "")


HOST_PLUGINS = Path(__file__).resolve().parents[2]
LAUNCHERS = {"claude": HOST_PLUGINS / "claude" / "agent_link_claude" / "host_plugin",
             "codex": HOST_PLUGINS / "codex" / "agent_link_codex" / "host_plugin"}


def test_the_host_plugins_declare_the_guard_for_the_edit_tools() -> None:
    claude = json.loads((LAUNCHERS["claude"] / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"]
    assert [g["matcher"] for g in claude] == ["|".join([*EDIT_TOOLS, *sorted(SHELL_TOOLS)])]
    codex = json.loads((LAUNCHERS["codex"] / "hooks" / "codex-hooks.json").read_text())["hooks"]["PreToolUse"]
    assert [g["matcher"] for g in codex] == [f"^({'|'.join([*sorted(PATCH_TOOLS), *sorted(SHELL_TOOLS)])})$"]


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_the_launcher_never_stops_the_host(leased: str, tmp_path: Path, host: str) -> None:
    """Through the host plugin's launcher: a deny with agent-link working; with agent-link
    crashing, missing, or the leases plugin disabled, exit 0 and nothing printed (allowed)."""
    launcher = LAUNCHERS[host] / "hooks" / "agent-link.sh"
    event = "PreToolUse" if host == "claude" else "CodexPreToolUse"
    payload = json.dumps(edit(leased, "src/pkg/mod.py", tool="Write" if host == "claude" else "Edit"))
    if host == "codex":
        payload = json.dumps({**json.loads(payload), "tool_name": "Bash", "tool_input": {"command": "echo x > src/pkg/mod.py"}})
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    crash.chmod(0o755)
    good = str(Path(sys.executable).with_name("agent-link"))
    cases = {"working": {"AGENT_LINK_BIN": good}, "crashing": {"AGENT_LINK_BIN": str(crash)},
             "missing": {"AGENT_LINK_BIN": str(tmp_path / "gone"), "PATH": "/usr/bin:/bin"},
             "disabled": {"AGENT_LINK_BIN": good, "AGENT_LINK_DISABLE_PLUGINS": "leases"}}
    for case, env in cases.items():
        done = subprocess.run(["sh", str(launcher), "hook", "leases", event], input=payload, capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=60)
        assert done.returncode == 0, case
        assert ("deny" in done.stdout) == (case == "working"), (case, done.stdout)


OPENCODE_SESSION = "ses_0123456789abcdefABCDEF"
#: runs agent-link's opencode plugin's ``tool.execute.before`` for one call, as opencode would;
#: prints ``allowed`` or ``refused: <message>``
OPENCODE_DRIVER = """
const [plugin, call] = [process.argv[1], JSON.parse(process.argv[2])];
const { AgentLinkCaller } = await import(plugin);
const hooks = await AgentLinkCaller({ serverUrl: new URL("http://127.0.0.1:1"), directory: call.directory });
try {
  await hooks["tool.execute.before"]({ tool: call.tool, sessionID: call.session, callID: "c1" }, { args: call.args });
  console.log("allowed");
} catch (error) {
  console.log("refused: " + error.message);
}
"""


def run_opencode_plugin(tmp_path: Path, executable: Path, tool: str, args: dict[str, Any], directory: str,
                        session: str = OPENCODE_SESSION, **env: str) -> str:
    from agent_link_opencode.install import stage_plugin
    from agent_link_testing.hosts import node_binary

    plugin = tmp_path / "agent-link.js"
    stage_plugin(plugin, executable)
    call = {"tool": tool, "args": args, "directory": directory, "session": session}
    done = subprocess.run([str(node_binary()), "--input-type=module", "-e", OPENCODE_DRIVER, plugin.as_uri(), json.dumps(call)],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_opencode_plugin_refuses_writes_and_fails_open(leased: str, tmp_path: Path, app: App) -> None:
    """agent-link's opencode plugin (``tool.execute.before``): opencode's writing tools on a
    leased path are refused with the holder named; reads, the holder's own paths and
    everything with agent-link crashing or missing go ahead."""
    good = Path(sys.executable).with_name("agent-link")
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    crash.chmod(0o755)
    patch = "*** Begin Patch\n*** Add File: src/pkg/new.py\n+x\n*** End Patch\n"
    writes = {"write": {"filePath": f"{leased}/src/pkg/mod.py", "content": "x"},
              "edit": {"filePath": "src/pkg/mod.py", "oldString": "a", "newString": "b"},
              "apply_patch": {"patchText": patch},
              "bash": {"command": "touch mod.py", "workdir": "src/pkg"}}
    for tool, args in writes.items():
        answer = run_opencode_plugin(tmp_path, good, tool, args, leased)
        assert answer.startswith("refused: agent-link:") and "codex:thread-1 holds src/pkg" in answer, (tool, answer)
        assert "splitting the module" in answer and "message_agent" in answer
    assert run_opencode_plugin(tmp_path, good, "read", {"filePath": "src/pkg/mod.py"}, leased) == "allowed"
    assert run_opencode_plugin(tmp_path, good, "bash", {"command": "cat src/pkg/mod.py"}, leased) == "allowed"
    claim(app.store, f"opencode:{OPENCODE_SESSION}", Project(leased, False), ["src/mine"], exclusive=True, reason=None,
          ttl_ms=600_000, now=now_ms())
    assert run_opencode_plugin(tmp_path, good, "write", {"filePath": "src/mine/a.py", "content": "x"}, leased) == "allowed"
    for broken in (crash, tmp_path / "gone"):
        assert run_opencode_plugin(tmp_path, broken, "write", writes["write"], leased) == "allowed", broken
    assert run_opencode_plugin(tmp_path, good, "write", writes["write"], leased, AGENT_LINK_DISABLE_PLUGINS="leases") == "allowed"
