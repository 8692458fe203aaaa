"""The Codex tools' contract against a REAL Codex app-server (the pinned CLI, stub model), through
a real MCP client session with the receipts plugin: launch with effort and its deep link and
receipt, send facets of a started turn, wait_for_agent's turn_completed / idle, the sidebar on a
host without one, archive and its receipt, health's Codex version and desktopPush."""

from __future__ import annotations

import asyncio
import re
import subprocess

import pytest

from agent_link_testing.codex_host import CodexAppServer, codex_binary
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.responses_stub import ResponsesStub, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT_S = 30.0


def reported_version() -> str:
    """What the pinned Codex says it is (tests never hard-code a host version)."""
    out = subprocess.run([str(codex_binary()), "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    found = re.search(r"\d+\.\d+\.\d+\S*", out)
    assert found, out
    return found.group(0)


async def test_launch_send_wait_archive_receipts_and_health(stub: ResponsesStub, host: CodexAppServer) -> None:
    server = host
    env = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_SOCK": str(server.socket_path), "CODEX_HOME": str(server.codex_home),
           "AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_CODEX_BIN": str(codex_binary()),
           "AGENT_LINK_DISABLE_PLUGINS": "claude projects approvals forks"}
    async with agent_link_mcp(env) as client:

        async def ok(name: str, args: dict | None = None) -> dict:
            result = await client.call(name, args or {})
            assert result["ok"], (name, result)
            return result

        # launch: effort reaches the model, the deep link comes back without opening anything, a receipt is written
        stub.enqueue(text("first answer"))
        launched = await ok("launch_codex_thread", {"name": "contract", "message": "Say hi", "effort": "high", "cwd": str(server.workdir),
                                                    "receipt": {"purpose": "contract test", "tags": ["t"]}})
        tid = launched["threadId"]
        assert launched["gui"]["deepLink"] == f"codex://threads/{tid}" and launched["gui"]["attempted"] is False
        assert launched["turn"]["turnId"] == launched["turnId"] and launched["peerMessage"]["messageId"] == launched["messageId"]
        first = await asyncio.to_thread(stub.wait_for, lambda r: r.contains(launched["messageId"]), WAIT_S)
        assert (first.body.get("reasoning") or {}).get("effort") == "high"
        assert launched["receipt"]["recorded"] is True
        [launch] = (await ok("list_agent_link_receipts", {"action": "launch_thread"}))["data"]
        assert launch["id"] == launched["receipt"]["id"] and launch["purpose"] == "contract test" and launch["tags"] == ["t"]
        assert launch["target"]["kind"] == "codex_thread" and launch["target"]["deepLink"] == f"codex://threads/{tid}"
        assert launch["details"]["launchedBy"] == "test:alice" and launch["origin"]["sources"]["threadId"] == "not_supplied"

        # wait_for_agent without replyToMessageId: the thread's own outcome
        waited = await ok("wait_for_agent", {"agent": f"codex:{tid}", "timeoutMs": 30000, "pollIntervalMs": 250})
        assert waited["outcome"] in ("turn_completed", "idle") and waited["turn"]["status"] == "completed"
        assert "finalResponse" not in waited["turn"]  # a turn's text is never an answer
        idle = await ok("wait_for_agent", {"agent": f"codex:{tid}", "timeoutMs": 5000, "pollIntervalMs": 250})
        assert idle["outcome"] == "idle" and idle["timedOut"] is False

        # a send that starts a turn: the separate facets
        stub.enqueue(text("second answer"))
        sent = await ok("message_codex_thread", {"threadId": tid, "message": "And now?", "anticipation": "fyi"})
        assert sent["delivery"] == "delivered" and sent["action"] == "started_turn"
        assert sent["turn"]["turnId"] == sent["turnId"] and sent["turn"]["action"] == "started"
        assert sent["runtimeState"]["loaded"] is True and sent["archiveState"] == "active"
        assert sent["desktopVisibility"]["status"] == "unknown"
        assert sent["peerMessage"] == {"messageId": sent["messageId"], "from": "test:alice", "fromHarness": "test", "fromVerified": False,
                                       "sentAt": sent["peerMessage"]["sentAt"], "enveloped": True}
        during = await ok("wait_for_agent", {"agent": f"codex:{tid}", "timeoutMs": 30000, "pollIntervalMs": 250})
        assert during["outcome"] in ("turn_completed", "idle")

        # the sidebar on a host without one: ok, with what is unsupported
        sidebar = await ok("get_codex_sidebar_state")
        assert sidebar["sidebarState"]["authority"] is None and sidebar["sidebarState"]["unsupported"]

        # archive writes its receipt with the loaded-thread guard's evidence
        archived = await ok("archive_codex_thread", {"threadId": tid, "reason": "done"})
        assert archived["receipt"]["recorded"] is True
        [receipt] = (await ok("list_agent_link_receipts", {"action": "archive_thread", "target": f"codex:{tid}"}))["data"]
        assert receipt["target"]["kind"] == "codex_thread" and receipt["evidence"]["action"] == "app_server_archive"
        assert receipt["evidence"]["loadedThreadGuard"]["status"] in ("idle", "notLoaded")
        assert receipt["details"]["reason"] == "done"
        again = await ok("archive_codex_thread", {"threadId": tid, "receipt": {"record": False}})
        assert again["status"] == "already_archived" and again["receipt"] == {"record": False, "recorded": False, "id": None}
        assert len((await ok("list_agent_link_receipts", {"action": "archive_thread"}))["data"]) == 1
        kinds = {r["target"]["kind"] for r in (await ok("list_agent_link_receipts", {"targetKind": "codex"}))["data"]}
        assert kinds == {"codex_thread"}

        # health: the installed version, the verified one, the warning exactly when they differ
        health = await ok("agent_link_health", {"startAppServer": True})
        codex = health["harnesses"]["codex"]
        installed = reported_version()
        assert codex["version"]["installed"] == installed and codex["versionProbed"] is True
        desktop = codex["desktopPush"]
        assert desktop["mode"] == "mailbox-only" and desktop["installedCodexVersion"] == installed
        assert desktop["holderCheck"]["available"] is True and desktop["holderCheck"]["method"] in ("psutil", "lsof")
        differs = [w for w in desktop["warnings"] if w["code"] == "codex_version_differs"]
        assert bool(differs) == (installed != desktop["verifiedCodexVersion"])
        hook = codex["promptHook"]
        assert hook["trust"] == "not_installed" and hook["declared"] is False and "trustSource" in hook
