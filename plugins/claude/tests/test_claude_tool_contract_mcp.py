"""The Claude tools' contract details through a real MCP client session, with the receipts and
roles plugins: message_claude_session keeps its receipt and roleProcedure fields, writes a
receipt whose target kind is claude_session, warns about allowTargetOverride, message_agent
reaches an exact archived address, health counts the Claude mailbox, roles show on listings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.config import load_config
from agent_link_core.mailbox import Mailbox, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import Store
from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ME = "aaaaaaaa-0000-4000-8000-0000000000e1"
PEER = "bbbbbbbb-0000-4000-8000-0000000000e2"
ARCHIVED = "dddd-00e4"


@pytest.fixture
def env(fake_claude: Any, isolated_env: Path) -> dict[str, str]:
    fake_claude.write_transcript(ME, "/work/me", title="My own session")
    fake_claude.write_transcript(PEER, "/work/parser", title="Parser rewrite")
    fake_claude.write_sidecar(fake_claude.linux_desktop_root(), ARCHIVED, surface_dir="local-agent-mode-sessions",
                              title="Old research", archived=True)
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "roles.json").write_text(json.dumps({"version": 1, "roles": {"reviewer": {"address": f"claude:{PEER}"}}}))
    (isolated_env / "roles").mkdir()
    (isolated_env / "roles" / "reviewer.md").write_text("Review carefully.")
    return {"CLAUDE_CODE_SESSION_ID": ME, "AGENT_LINK_DISABLE_PLUGINS": "codex projects approvals forks"}


async def test_message_claude_session_fields_receipt_and_listings(env: dict[str, str]) -> None:
    async with agent_link_mcp(env) as me:
        sent = await me.call("message_claude_session", {"sessionId": "role:reviewer", "message": "Please review", "anticipation": "reply",
                                                        "allowTargetOverride": True, "receipt": {"purpose": "review"}})
        assert sent["ok"] and sent["receipt"]["recorded"] is True and sent["receipt"]["id"]
        assert sent["roleProcedure"]["name"] == "reviewer" and sent["roleProcedure"]["textIncluded"] is True
        assert [w["details"]["argument"] for w in sent["warnings"] if w["code"] == "deprecated_argument"] == ["allowTargetOverride"]
        [receipt] = (await me.call("list_agent_link_receipts", {"action": "message_claude_session"}))["data"]
        assert receipt["id"] == sent["receipt"]["id"] and receipt["target"]["kind"] == "claude_session" and receipt["purpose"] == "review"
        assert [r["id"] for r in (await me.call("list_agent_link_receipts", {"targetKind": "claude_session"}))["data"]][-1] == receipt["id"]

        listed = await me.call("list_agents", {"harness": "claude"})
        roles = {s["address"]: s["roles"] for s in listed["sessions"]}
        assert roles[f"claude:{PEER}"] == ["reviewer"] and roles[f"claude:{ME}"] == []
        assert (await me.call("resolve_agent", {"query": "role:reviewer"}))["status"] == "resolved"

        # an exact archived address takes mail through message_agent too (it waits for the session)
        queued = await me.call("message_agent", {"to": f"claude:{ARCHIVED}", "message": "when you are back"})
        assert queued["ok"] and queued["delivery"] == "queued"
        assert (await me.call("message_agent", {"to": "Old research", "message": "x"}))["ok"] is False  # fuzzy never picks it

        health = await me.call("agent_link_health", {})
        mailbox = health["harnesses"]["claude"]["mailbox"]
        assert (mailbox["session"], mailbox["queued"], mailbox["open"]) == (f"claude:{ME}", 0, 0)
        # mail from a peer (nobody may message itself), stored as the peer's process would
        config = load_config()
        box = Mailbox(Store(config.db_path), config)
        box.store_message(OutgoingMessage(new_message_id(), Caller(f"claude:{PEER}", "env", "claude"), f"claude:{ME}", f"claude:{ME}",
                                          "a question", "reply", None, None))
        box.store.close()
        mailbox = (await me.call("agent_link_health", {}))["harnesses"]["claude"]["mailbox"]
        assert (mailbox["queued"], mailbox["open"]) == (1, 1)
        assert health["hostDetection"] == {"host": "claude", "source": "environment", "variable": "CLAUDE_CODE_SESSION_ID"}
