"""The edit guard in a REAL opencode (pinned ``opencode serve``, stub model) with agent-link's
opencode plugin as ``agent-link install opencode`` writes it (``stage_plugin``: the JS plugin
running this installation's ``agent-link``): a ``write`` into a path another session holds
exclusively is refused with the holder, the reason and how to ask; a ``read`` of it passes;
the session's own lease lets it write; the ``write`` goes through once the lease is released;
with the agent-link program gone, opencode goes on unchanged (fail-open).

If the program is missing these tests fail with "run `make hosts`" -- they never skip.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, claim, release
from agent_link_opencode.install import stage_plugin
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]

TURN_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-link-state")


@pytest.fixture(scope="module")
def stub() -> Iterator[MessagesStub]:
    with MessagesStub() as running:
        yield running


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program the staged plugin runs: this installation's agent-link, through a script a
    test can remove."""
    path = tmp_path_factory.mktemp("bin") / "agent-link"
    path.write_text(f'#!/bin/sh\nexec "{Path(sys.executable).with_name("agent-link")}" "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def server(stub: MessagesStub, state_dir: Path, launcher: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpencodeServer]:
    plugin = tmp_path_factory.mktemp("host-plugin") / "agent-link.js"
    stage_plugin(plugin, launcher)
    with OpencodeServer(stub.base_url, config_extra={"plugin": [plugin.as_uri()]},
                        env={"AGENT_LINK_STATE_DIR": str(state_dir)}) as running:
        yield running


@pytest.fixture
def app(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(state_dir))
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    yield App.create()


def turn(server: OpencodeServer, stub: MessagesStub, session_id: str, tool: str, args: dict, call_id: str) -> dict:
    """Script one tool call, run a turn, and return the tool result the model got back."""
    stub.enqueue(Reply.tool_use(tool, args, id=call_id), "done")
    server.request("POST", f"/session/{session_id}/prompt_async", {"parts": [{"type": "text", "text": f"use {tool}"}]})
    server.wait_for_reply(session_id, timeout_s=TURN_TIMEOUT_S)
    [result] = [r for r in stub.main_requests[-1].tool_results() if r["tool_use_id"] == call_id]
    return result


def test_opencode_write_refused_until_released(server: OpencodeServer, stub: MessagesStub, app: App) -> None:
    repo = str(server.workdir.resolve())
    root = Project(repo, False)
    Path(repo, "src", "pkg").mkdir(parents=True)
    Path(repo, "src", "pkg", "old.py").write_text("x = 1\n")
    target = Path(repo, "src", "pkg", "new.py")
    claim(app.store, "codex:thread-1", root, ["src/pkg"], exclusive=True, reason="splitting the module", ttl_ms=600_000, now=now_ms())
    session = server.request("POST", "/session", {"title": "guarded"})
    write = {"filePath": str(target), "content": "print('hi')\n"}

    refused = json.dumps(turn(server, stub, session["id"], "write", write, "toolu_w1"))
    assert "codex:thread-1" in refused and "splitting the module" in refused and "message_agent" in refused, refused
    assert not target.exists()

    read = json.dumps(turn(server, stub, session["id"], "read", {"filePath": str(Path(repo, "src", "pkg", "old.py"))}, "toolu_r1"))
    assert "x = 1" in read, read

    # the session's own lease never stops it
    claim(app.store, f"opencode:{session['id']}", root, ["src/mine"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    mine = Path(repo, "src", "mine", "a.py")
    turn(server, stub, session["id"], "write", {"filePath": str(mine), "content": "y = 2\n"}, "toolu_w2")
    assert mine.read_text() == "y = 2\n"

    release(app.store, "codex:thread-1", root, ["src/pkg"], now_ms())
    turn(server, stub, session["id"], "write", write, "toolu_w3")
    assert target.read_text() == "print('hi')\n"
    assert not stub.unscripted


def test_opencode_without_agent_link_the_write_goes_ahead(server: OpencodeServer, stub: MessagesStub, app: App,
                                                           launcher: Path) -> None:
    repo = str(server.workdir.resolve())
    claim(app.store, "codex:thread-2", Project(repo, False), ["held"], exclusive=True, reason="mine", ttl_ms=600_000, now=now_ms())
    session = server.request("POST", "/session", {"title": "no agent-link"})
    target = Path(repo, "held", "x.py")
    refused = json.dumps(turn(server, stub, session["id"], "write", {"filePath": str(target), "content": "1\n"}, "toolu_f1"))
    assert "codex:thread-2" in refused and not target.exists()
    launcher.unlink()  # the program the plugin runs is gone: opencode goes on as without agent-link
    turn(server, stub, session["id"], "write", {"filePath": str(target), "content": "1\n"}, "toolu_f2")
    assert target.read_text() == "1\n"
