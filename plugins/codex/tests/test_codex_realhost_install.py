"""The Codex plugin installed the way a person installs it, against the REAL pinned Codex.

A copy of the plugin's own files (marketplace, manifests, launcher, hook declarations; no
checkout, no ``.venv``: the launcher finds ``agent-link`` on PATH) is registered with
``codex plugin marketplace add`` and installed with ``codex plugin add``. Then:

* 20 consecutive ``codex exec`` runs against the stub model: the first model request of every
  run carries the agent-link tools (the server is declared ``required``; the first run's server
  keeps its opening answers, from which the launcher answers every later run's opening);
* a run whose model calls ``agent_link_health`` through the installed plugin gets its result,
  and the server used ``AGENT_LINK_STATE_DIR`` from Codex's environment (``env_vars``);
* with the state directory set only in the settings file (``agent-link config set``), a message
  Codex's model sends through the plugin is in the CLI's inbox: one mailbox;
* with ``CLAUDE_CONFIG_DIR`` set, Codex's model reaches a Claude session kept there (issue 29).

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_link_testing.codex_host import (
    REPO_ROOT,
    STUB_KEY_ENV,
    codex_binary,
    write_codex_config,
)
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(1800)]

RUNS = 20
agent_link = str(Path(sys.executable).with_name("agent-link"))
RUN_BOUND_S = 300  # a bound per codex command, never a speed assertion
PLUGIN_DIR = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="alinst-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def stage(dest: Path) -> Path:
    shutil.copytree(PLUGIN_DIR, dest)
    market = json.loads((REPO_ROOT / ".agents" / "plugins" / "marketplace.json").read_text())
    for entry in market["plugins"]:
        entry["source"]["path"] = "./"
    (dest / ".agents" / "plugins").mkdir(parents=True)
    (dest / ".agents" / "plugins" / "marketplace.json").write_text(json.dumps(market))
    return dest


def codex(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(codex_binary()), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=RUN_BOUND_S, check=False)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-4000:])
    return done


def has_agent_link_tools(names: list[str]) -> bool:
    return any(name.endswith("list_agents") for name in names) and any(name.endswith("message_agent") for name in names)


def test_installed_plugin_tools_are_in_every_first_request(root: Path) -> None:
    marketplace = stage(root / "mkt")
    manifest = json.loads((marketplace / ".codex-plugin" / "plugin.json").read_text())
    market = json.loads((marketplace / ".agents" / "plugins" / "marketplace.json").read_text())
    plugin_id = f"{manifest['name']}@{market['name']}"
    state = root / "state"
    with ResponsesStub(default=text("ok")) as stub:
        home = root / "home"
        write_codex_config(home / ".codex", stub.base_url)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_"))}
        env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), XDG_CACHE_HOME=str(home / ".cache"),
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", AGENT_LINK_STATE_DIR=str(state),
                   **{STUB_KEY_ENV: "stub-key"})
        codex(["plugin", "marketplace", "add", str(marketplace)], env, root)
        codex(["plugin", "add", plugin_id], env, root)
        seen = 0
        for run in range(RUNS):
            codex(["exec", "--skip-git-repo-check", f"run {run}"], env, root)
            requests = stub.responses_requests()
            assert len(requests) > seen, run
            first = requests[seen]
            assert has_agent_link_tools(first.tool_names()), (run, first.tool_names())
            seen = len(requests)
        # what the launcher answered the later runs' openings from (hooks/agent-link.sh)
        kept = sorted(p.name for p in (home / ".cache" / "agent-link" / "launcher").glob("*/*"))
        assert len(kept) == 2 and kept[0].startswith("initialize-") and kept[1].startswith("tools-list-"), kept

        stub.enqueue(mcp_tool_call("codex_agent_link", "agent_link_health", {}), text("done"))
        codex(["exec", "--skip-git-repo-check", "health please"], env, root)
        outputs = [t for r in stub.responses_requests()[seen:] for t in r.function_call_output_texts()]
        assert any('{"ok":true,"version"' in t for t in outputs), outputs  # Codex shortens the output
        # the server used the state dir from Codex's environment, not the default under HOME
        assert (state / "agent-link.db").exists() and not (home / ".agent-link").exists()

        # configured only through the settings file: Codex's server and the CLI share one mailbox
        del env["AGENT_LINK_STATE_DIR"]
        boxed = root / "boxed"
        subprocess.run([agent_link, "config", "set", "state_dir", str(boxed)], env=env, check=True, timeout=RUN_BOUND_S)
        stub.enqueue(mcp_tool_call("codex_agent_link", "message_agent", {"to": "team:cli", "message": "from codex"}),
                     text("done"))
        codex(["exec", "--skip-git-repo-check", "write to the cli"], env, root)
        inbox = subprocess.run([agent_link, "inbox", "--as", "team:cli", "--json"], env={**env, "AGENT_LINK_ADDRESS": "team:cli"},
                               capture_output=True, text=True, check=True, timeout=RUN_BOUND_S)
        assert "from codex" in inbox.stdout, inbox.stdout
        assert (boxed / "agent-link.db").exists() and not (home / ".agent-link").exists()

        # issue 29, item 8: Claude Code's sessions live where CLAUDE_CONFIG_DIR says; Codex's
        # server must see that variable to reach them (not_found before it was declared)
        claude_cfg, sid = root / "claude-cfg", "77777777-7777-4777-8777-777777777777"
        transcript = claude_cfg / "projects" / "-work-proj" / f"{sid}.jsonl"
        transcript.parent.mkdir(parents=True)
        transcript.write_text(json.dumps({"type": "user", "sessionId": sid, "cwd": "/work/proj", "timestamp": "2026-01-02T03:04:05.678Z",
                                          "message": {"role": "user", "content": "fix the parser"}}) + "\n")
        env["CLAUDE_CONFIG_DIR"] = str(claude_cfg)
        seen = len(stub.responses_requests())
        stub.enqueue(mcp_tool_call("codex_agent_link", "message_agent", {"to": f"claude:{sid}", "message": "hello claude"}),
                     text("done"))
        codex(["exec", "--skip-git-repo-check", "write to the claude session"], env, root)
        outputs = [t for r in stub.responses_requests()[seen:] for t in r.function_call_output_texts()]
        assert any('"ok":true' in t for t in outputs) and not any("not_found" in t for t in outputs), outputs
