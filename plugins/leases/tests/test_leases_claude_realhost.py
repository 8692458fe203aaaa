"""The edit guard in a real Claude Code session (``claude -p``, stub model) with agent-link's
Claude Code plugin installed (its shipped ``hooks/hooks.json``, nothing declared by hand): a
Write into a path a Codex thread holds exclusively is refused naming the holder, a Read of it
passes, and the Write goes through once the lease is released."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, claim, release
from agent_link_testing.claude_host import ClaudeHost, agent_link_bin, stage_plugin
from agent_link_testing.messages_stub import MessagesStub, Reply

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]

RUN_TIMEOUT_S = 90.0


def test_claude_write_refused_until_released(app: App, repo: str, tmp_path: Path) -> None:
    target = Path(repo, "src", "pkg", "new.py")
    Path(repo, "src", "pkg", "old.py").write_text("x = 1\n")
    root = Project(repo, False)
    claim(app.store, "codex:thread-1", root, ["src/pkg"], exclusive=True, reason="splitting the module", ttl_ms=600_000, now=now_ms())
    with MessagesStub() as stub:
        host = ClaudeHost.create(Path(os.environ["HOME"]), stub=stub, env={"AGENT_LINK_BIN": str(agent_link_bin())})
        host.install_plugin(stage_plugin(tmp_path / "plugin"), "agent-link@agent-link")
        host.allow_tools("Write", "Read")
        write = {"file_path": str(target), "content": "print('hi')\n"}

        stub.enqueue(Reply.tool_use("Write", write, id="toolu_w1"), "It is leased.")
        done = host.run_p("write the file", cwd=repo, timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        [result] = stub.main_requests[-1].tool_results()
        text = json.dumps(result["content"])
        assert result["tool_use_id"] == "toolu_w1" and "codex:thread-1" in text and "splitting the module" in text
        assert not target.exists()

        stub.enqueue(Reply.tool_use("Read", {"file_path": str(Path(repo, "src", "pkg", "old.py"))}, id="toolu_r1"), "Read it.")
        done = host.run_p("read the file", cwd=repo, timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        [read] = stub.main_requests[-1].tool_results()
        assert read["tool_use_id"] == "toolu_r1" and "x = 1" in json.dumps(read["content"])

        release(app.store, "codex:thread-1", root, ["src/pkg"], now_ms())
        stub.enqueue(Reply.tool_use("Write", write, id="toolu_w2"), "Written.")
        done = host.run_p("write the file", cwd=repo, timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        assert target.read_text() == "print('hi')\n"
        assert not stub.unscripted


def test_claude_bash_write_refused_until_released(app: App, repo: str, tmp_path: Path) -> None:
    """A Bash command writing into a Codex thread's lease is refused naming the holder; a
    read-only command of the same file runs; the write runs once the lease is released."""
    Path(repo, "src", "pkg", "old.py").write_text("x = 1\n")
    root = Project(repo, False)
    claim(app.store, "codex:thread-1", root, ["src/pkg"], exclusive=True, reason="splitting the module", ttl_ms=600_000, now=now_ms())
    write = {"command": "cd src && echo 'y = 2' >> pkg/old.py", "description": "append a line"}
    with MessagesStub() as stub:
        host = ClaudeHost.create(Path(os.environ["HOME"]), stub=stub, env={"AGENT_LINK_BIN": str(agent_link_bin())})
        host.install_plugin(stage_plugin(tmp_path / "plugin"), "agent-link@agent-link")
        host.allow_tools("Bash")

        stub.enqueue(Reply.tool_use("Bash", write, id="toolu_b1"), "It is leased.")
        done = host.run_p("append to the file", cwd=repo, timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        [result] = stub.main_requests[-1].tool_results()
        text = json.dumps(result["content"])
        assert result["tool_use_id"] == "toolu_b1" and "codex:thread-1" in text and "splitting the module" in text
        assert Path(repo, "src", "pkg", "old.py").read_text() == "x = 1\n"

        read = {"command": "grep -c x src/pkg/old.py > /dev/null && cat src/pkg/old.py", "description": "read it"}
        stub.enqueue(Reply.tool_use("Bash", read, id="toolu_b2"), "Read it.")
        done = host.run_p("read the file", cwd=repo, timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        [shown] = stub.main_requests[-1].tool_results()
        assert shown["tool_use_id"] == "toolu_b2" and "x = 1" in json.dumps(shown["content"])

        release(app.store, "codex:thread-1", root, ["src/pkg"], now_ms())
        stub.enqueue(Reply.tool_use("Bash", write, id="toolu_b3"), "Appended.")
        done = host.run_p("append to the file", cwd=repo, timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        assert Path(repo, "src", "pkg", "old.py").read_text() == "x = 1\ny = 2\n"
        assert not stub.unscripted
