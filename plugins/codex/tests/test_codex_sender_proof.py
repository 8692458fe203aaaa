"""``fromVerified`` only for a Codex thread that exists (issue 18, "Identity").

``CODEX_THREAD_ID`` in the server's environment, or a ``threadId`` in a tool call's
``_meta``, names the caller; the message is marked ``fromVerified="true"`` only when Codex
has that thread (here: its transcript in ``CODEX_HOME``, no app-server). A name with no such
thread is stored unverified and the send says so. Through a real MCP client session.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
REAL = "01a22a93-0000-7000-8000-000000000001"
GHOST = "01a22a93-0000-7000-8000-0000000000ff"
BASE = {"AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}


def from_verified(envelope: str) -> str:
    match = re.search(r'fromVerified="(\w+)"', envelope)
    assert match, envelope
    return match.group(1)


async def test_only_an_existing_thread_signs_verified(isolated_env: Path, make_rollout: Callable[..., Path]) -> None:
    make_rollout(isolated_env.parent / ".codex", REAL, cwd="/work/alpha", messages=[("user", "hello", None)])
    async with agent_link_mcp({**BASE, "CODEX_THREAD_ID": GHOST}) as ghost:
        sent = await ghost.call("message_agent", {"to": "test:bob", "message": "from nowhere"})
        assert sent["ok"] is True and sent["delivery"] == "queued"
        [warning] = [w for w in sent["warnings"] if w["code"] == "sender_unverified"]
        assert warning["details"] == {"address": f"codex:{GHOST}", "namedBy": "env", "reason": "no_such_session"}
        # the same for a _meta threadId naming no thread
        meta = {"threadId": GHOST, "turnId": "t1", "callId": "c1"}
        by_meta = await ghost.call("message_agent", {"to": "test:bob", "message": "meta ghost"}, meta=meta)
        assert [w["details"]["namedBy"] for w in by_meta["warnings"] if w["code"] == "sender_unverified"] == ["runtime_context"]
        # a _meta threadId naming a thread Codex has is verified
        meta = {"threadId": REAL, "turnId": "t1", "callId": "c2"}
        by_real = await ghost.call("message_agent", {"to": "test:bob", "message": "meta real"}, meta=meta)
        assert "sender_unverified" not in {w["code"] for w in by_real.get("warnings", [])}
    async with agent_link_mcp({**BASE, "CODEX_THREAD_ID": REAL}) as real:
        sent = await real.call("message_agent", {"to": "test:bob", "message": "from a real thread"})
        assert sent["ok"] is True and "sender_unverified" not in {w["code"] for w in sent.get("warnings", [])}
    async with agent_link_mcp({**BASE, "AGENT_LINK_ADDRESS": "test:bob"}) as bob:
        inbox = await bob.call("read_agent_link_inbox", {})
        verdicts = {m["from"]: m["fromVerified"] for m in inbox["messages"]}
        envelopes = inbox["renderedBlock"].split("</agent-link-message>")[:-1]
        by_body = {body: from_verified(env) for env in envelopes for body in
                   ("from nowhere", "meta ghost", "meta real", "from a real thread") if body in env}
    assert by_body == {"from nowhere": "false", "meta ghost": "false", "meta real": "true", "from a real thread": "true"}
    assert verdicts[f"codex:{GHOST}"] is False and verdicts[f"codex:{REAL}"] is True
