"""``fromVerified`` only when Codex proves the calling thread (issues 18 and 29, "Identity").

``CODEX_THREAD_ID`` in the environment, or a ``threadId`` in a tool call's ``_meta``, only
names the caller. The message is marked ``fromVerified="true"`` only when the thread exists
and a Codex process among the caller's ancestors holds that thread's transcript open
(:mod:`agent_link_codex.proof`; here a process of a program named ``codex`` stands in for
Codex, :mod:`agent_link_testing.host_program`). A name of a thread that does not exist, or of
one that exists but whose Codex process is not above the caller, is stored unverified and the
send says why. Through a real MCP client session and the CLI (the reader's inbox in the
test's process).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_testing.host_program import HostProgram
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import call_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
REAL = "01a22a93-0000-7000-8000-000000000001"
GHOST = "01a22a93-0000-7000-8000-0000000000ff"
BASE = {"AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}


def from_verified(envelope: str) -> str:
    match = re.search(r'fromVerified="(\w+)"', envelope)
    assert match, envelope
    return match.group(1)


def reasons(sent: dict[str, object]) -> list[tuple[str, str]]:
    return [(w["details"]["namedBy"], w["details"]["reason"]) for w in sent.get("warnings", [])  # type: ignore[union-attr,index]
            if w["code"] == "sender_unverified"]


def cli_send(host: HostProgram, body: str) -> dict[str, object]:
    env = {**os.environ, **BASE, "CODEX_THREAD_ID": REAL}
    done = host.run([sys.executable, "-m", "agent_link_core", "send", "test:bob", body, "--json"], env)
    assert done["rc"] == 0, done["stderr"]
    return dict(json.loads(done["stdout"]))


async def test_only_a_thread_codex_proves_signs_verified(isolated_env: Path, make_rollout: Callable[..., Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rollout = make_rollout(isolated_env.parent / ".codex", REAL, cwd="/work/alpha", messages=[("user", "hello", None)])
    async with agent_link_mcp({**BASE, "CODEX_THREAD_ID": GHOST}) as ghost:
        sent = await ghost.call("message_agent", {"to": "test:bob", "message": "from nowhere"})
        assert sent["ok"] is True and sent["delivery"] == "queued"
        assert reasons(sent) == [("env", "no_such_session")]
        meta = {"threadId": GHOST, "turnId": "t1", "callId": "c1"}
        by_meta = await ghost.call("message_agent", {"to": "test:bob", "message": "meta ghost"}, meta=meta)
        assert reasons(by_meta) == [("runtime_context", "no_such_session")]
        # issue 29: _meta naming a thread Codex has, from a client that is not Codex
        meta = {"threadId": REAL, "turnId": "t1", "callId": "c2"}
        by_real = await ghost.call("message_agent", {"to": "test:bob", "message": "meta real"}, meta=meta)
        assert reasons(by_real) == [("runtime_context", "not_proven")]
    # issue 29, item 1b: CODEX_THREAD_ID=<an existing thread> in a process that is not that thread
    async with agent_link_mcp({**BASE, "CODEX_THREAD_ID": REAL}) as real:
        sent = await real.call("message_agent", {"to": "test:bob", "message": "from a real thread name"})
        assert sent["ok"] is True and reasons(sent) == [("env", "not_proven")]
    with HostProgram(tmp_path / "bin", "codex") as codex:
        # a Codex process above the caller that does not hold the thread proves nothing
        assert reasons(cli_send(codex, "codex without the thread")) == [("env", "not_proven")]
        codex.hold(rollout)
        assert reasons(cli_send(codex, "inside the thread")) == []
    with HostProgram(tmp_path / "plain", "python3") as plain:  # holding the transcript is not enough
        plain.hold(rollout)
        assert reasons(cli_send(plain, "a plain process holding it")) == [("env", "not_proven")]
    for name, value in {**BASE, "AGENT_LINK_ADDRESS": "test:bob"}.items():  # the reader: in this process
        monkeypatch.setenv(name, value)
    bob = App.create()
    try:
        inbox = await call_tool(bob, "read_agent_link_inbox")
    finally:
        await bob.aclose()
    envelopes = inbox["renderedBlock"].split("</agent-link-message>")[:-1]
    bodies = ("from nowhere", "meta ghost", "meta real", "from a real thread name", "codex without the thread",
              "inside the thread", "a plain process holding it")
    by_body = {body: from_verified(env) for env in envelopes for body in bodies if body in env}
    views = {m["id"]: m["fromVerified"] for m in inbox["messages"]}
    assert by_body == {body: "true" if body == "inside the thread" else "false" for body in bodies}
    assert sorted(views.values()) == [False] * 6 + [True]
