"""One mailbox for the real Claude Code, the real Codex and the CLI, configured only through the
settings file, with both host plugins installed by ``agent-link install``.

One HOME; no ``AGENT_LINK_*`` or ``XDG_*`` variable anywhere; the state directory is set once with
``agent-link config set state_dir``. The pinned ``claude -p`` (stub Messages API) and the pinned
``codex exec`` (stub Responses API) each have their model call ``message_agent`` to
``team:cli`` through the installed plugin; the CLI's inbox for ``team:cli`` then holds both
messages, and the database is the configured one. A missing host binary fails the test
("run `make hosts`"); it never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.codex_host import STUB_KEY_ENV, codex_binary, write_codex_config
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(900)]

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))
SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
BOUND_S = 300.0  # a bound per command, never a speed assertion


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-4000:])
    return done


def test_claude_codex_and_the_cli_share_the_mailbox_the_settings_file_names(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = tmp_path / "project"
    cwd.mkdir()
    boxed = tmp_path / "boxed"
    unset = {name: None for name in os.environ if name.startswith(("AGENT_LINK_", "XDG_"))}
    with MessagesStub() as messages, ResponsesStub(default=text("ok")) as responses:
        claude = ClaudeHost.create(home, stub=messages, env=unset)
        env = claude.environ()
        assert not any(name.startswith(("AGENT_LINK_", "XDG_")) for name in env)
        env.update(CODEX_HOME=str(home / ".codex"), **{STUB_KEY_ENV: "stub-key"})
        write_codex_config(home / ".codex", responses.base_url)

        run([AGENT_LINK, "config", "set", "state_dir", str(boxed)], env, cwd)
        run([AGENT_LINK, "install", "claude", "--host-bin", str(claude.binary)], env, cwd)
        run([AGENT_LINK, "install", "codex", "--host-bin", str(codex_binary())], env, cwd)

        claude.allow_tools(SERVER_RULE)
        messages.enqueue(Reply.tool_use(f"{SERVER_RULE}__message_agent", {"to": "team:cli", "message": "from claude"}), "Sent.")
        done = claude.run_p("write to the cli", cwd=cwd, timeout_s=BOUND_S)
        assert done.returncode == 0, done.stderr
        responses.enqueue(mcp_tool_call("codex_agent_link", "message_agent", {"to": "team:cli", "message": "from codex"}),
                          text("done"))
        run([str(codex_binary()), "exec", "--skip-git-repo-check", "write to the cli"], env, cwd)

        inbox = json.loads(run([AGENT_LINK, "inbox", "--as", "team:cli", "--json"], {**env, "AGENT_LINK_ADDRESS": "team:cli"}, cwd).stdout)
        bodies = json.dumps(inbox)
        assert "from claude" in bodies and "from codex" in bodies, bodies
        assert (boxed / "agent-link.db").exists() and not (home / ".agent-link").exists()
        for verb_host in (("uninstall", "claude", str(claude.binary)), ("uninstall", "codex", str(codex_binary()))):
            run([AGENT_LINK, verb_host[0], verb_host[1], "--host-bin", verb_host[2]], env, cwd)
