"""The Codex tools' contract details that need no running Codex, through a real MCP client
session (autostart off, threads from transcripts): roles on listings, transcript-only threads
never shown as live, the ``*`` override rule, deprecated arguments with their effect, switch
receipts, the turn id's provenance, receipt filters as enums. A test's second setting of the
same server is called in this process (:func:`in_process`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_testing.host_program import launcher
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import call_tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

T1 = "01a22a93-0000-7000-8000-0000000000c1"
SENDER = "01a22a93-0000-7000-8000-0000000000c2"
BASE = {"AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude projects approvals forks"}


@pytest.fixture
def thread(isolated_env: Path, make_rollout: Callable[..., Path]) -> str:
    make_rollout(isolated_env.parent / ".codex", T1, cwd="/work/alpha", messages=[("user", "Build the parser", None)], name="parser")
    return T1


def write_roles(state: Path, data: dict[str, Any]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "roles.json").write_text(json.dumps({"version": 1, **data}))


async def test_listings_show_roles_and_never_a_transcript_as_live(isolated_env: Path, thread: str) -> None:
    write_roles(isolated_env, {"roles": {"builder": {"address": f"codex:{thread}"}}})
    async with agent_link_mcp({**BASE, "AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        listed = await alice.call("list_agents", {"harness": "codex"})
        [agent] = listed["sessions"]
        assert agent["roles"] == ["builder"] and agent["loaded"] is False and agent["receive"]["push"] is None
        assert (await alice.call("list_agents", {"harness": "codex", "loaded": True}))["sessions"] == []
        resolved = await alice.call("resolve_agent", {"query": f"codex:{thread}"})
        assert resolved["best"]["roles"] == ["builder"] and resolved["best"]["loaded"] is False
        fuzzy = await alice.call("resolve_agent", {"query": "parser"})
        assert fuzzy["status"] == "resolved" and fuzzy["candidates"][0]["roles"] == ["builder"]
        others = await alice.call("list_agents", {"harness": "test"})
        assert all(s["roles"] == [] for s in others["sessions"])


async def test_star_matches_only_a_sender_with_a_runtime_identity(isolated_env: Path, thread: str,
                                                                  make_rollout: Callable[..., Path], tmp_path: Path) -> None:
    # ``*`` matches a verified sender only: a thread Codex has, and Codex proves the caller
    # (issue 29: its process, here a stand-in, holds the thread's transcript above the server)
    rollout = make_rollout(isolated_env.parent / ".codex", SENDER, cwd="/work/alpha", messages=[("user", "Plan", None)], name="planner")
    write_roles(isolated_env, {"overridePolicy": {f"codex:{thread}": {"model": ["*"]}}})
    async with agent_link_mcp({**BASE, "AGENT_LINK_ADDRESS": "codex:" + SENDER}) as claimed:
        # an address only claimed through AGENT_LINK_ADDRESS is not a runtime identity
        refused = await claimed.call("message_agent", {"to": f"codex:{thread}", "message": "switch", "model": "gpt-other"})
        assert refused["error"]["code"] == "permission_denied"
        assert refused["error"]["details"]["reason"] == "model_switch_requires_fork_or_opt_in"
    meta = {"threadId": SENDER, "turnId": "turn-7", "callId": "call-1"}
    async with agent_link_mcp(BASE) as named:  # _meta from a client that is not Codex names, never proves
        refused = await named.call("message_agent", {"to": f"codex:{thread}", "message": "switch", "model": "gpt-other"}, meta=meta)
        assert refused["error"]["details"]["reason"] == "model_switch_requires_fork_or_opt_in"
    async with agent_link_mcp(BASE, launcher=launcher(tmp_path / "bin", "codex", [rollout])) as runtime:
        sent = await runtime.call("message_agent", {"to": f"codex:{thread}", "message": "switch", "model": "gpt-other"}, meta=meta)
        assert sent["ok"] and sent["switches"][0]["grantedBy"] == "policy" and sent["switches"][0]["policy"]["entry"] == "*"
        # receipts follow the visibility rule: the sender lists them as itself (its runtime identity)
        switches = await runtime.call("list_agent_link_receipts", {"action": "model_switch"}, meta=meta)
        [receipt] = switches["data"]
        assert receipt["kind"] == "model-switch" and receipt["messageId"] == sent["messageId"]
        assert receipt["target"]["kind"] == "codex_thread" and receipt["target"]["address"] == f"codex:{thread}"
        assert receipt["origin"]["turnId"] == "turn-7" and receipt["origin"]["sources"]["turnId"] == "runtime_context"
        assert receipt["details"]["grantedBy"] == "policy" and receipt["details"]["current"] == "gpt-other"
        assert sent["switchReceipts"] == [{"action": "model_switch", "setting": "model", "record": True, "recorded": True,
                                           "id": receipt["id"]}]
        by_kind = await runtime.call("list_agent_link_receipts", {"kind": "model-switch", "targetKind": "codex_thread"}, meta=meta)
        assert [r["id"] for r in by_kind["data"]] == [receipt["id"]]


async def test_deprecated_send_arguments_warn_and_keep_their_effect(isolated_env: Path, thread: str) -> None:
    async with agent_link_mcp({**BASE, "AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        plain = await alice.call("message_codex_thread", {"threadId": thread, "message": "a", "recentItems": 5, "allowParallelTurn": True})
        assert plain["ok"]
        deprecated = sorted(w["details"]["argument"] for w in plain["warnings"] if w["code"] == "deprecated_argument")
        assert deprecated == ["allowParallelTurn", "recentItems"]
        # without a policy a model change is refused ...
        refused = await alice.call("message_codex_thread", {"threadId": thread, "message": "b", "model": "gpt-other"})
        assert refused["error"]["details"]["reason"] == "model_switch_requires_fork_or_opt_in"
        # ... and allowTargetOverride still grants it, with a warning and a receipt
        granted = await alice.call("message_codex_thread", {"threadId": thread, "message": "b", "effort": "high", "allowTargetOverride": True})
        assert granted["ok"] and granted["switches"][0]["grantedBy"] == "allowTargetOverride"
        assert any(w["code"] == "deprecated_argument" and w["details"]["argument"] == "allowTargetOverride" for w in granted["warnings"])
        receipts = await alice.call("list_agent_link_receipts", {"action": "effort_change"})
        assert [r["details"]["grantedBy"] for r in receipts["data"]] == ["allowTargetOverride"]
        assert [(r["action"], r["recorded"], r["id"]) for r in granted["switchReceipts"]] == [("effort_change", True, receipts["data"][0]["id"])]
        # receipt.record false: the switch is still reported, and no receipt is written for it
        quiet = await alice.call("message_codex_thread", {"threadId": thread, "message": "d", "effort": "low", "allowTargetOverride": True,
                                                          "receipt": {"record": False}})
        assert quiet["ok"] and quiet["switches"][0]["current"] == "low"
        assert quiet["switchReceipts"] == [{"action": "effort_change", "setting": "effort", "record": False, "recorded": False, "id": None}]
        assert len((await alice.call("list_agent_link_receipts", {"action": "effort_change"}))["data"]) == 1
        plain_sends = await alice.call("message_codex_thread", {"threadId": thread, "message": "e"})
        assert "switchReceipts" not in plain_sends
        through_agent = await alice.call("message_agent", {"to": f"codex:{thread}", "message": "c", "allowTargetOverride": False})
        assert any(w["code"] == "deprecated_argument" for w in through_agent["warnings"])
        # Codex send facets are declared and filled even when the message stays queued
        for key in ("runtimeState", "archiveState", "desktopVisibility", "peerMessage", "turn"):
            assert key in plain, key
        assert plain["peerMessage"]["messageId"] == plain["messageId"] and plain["peerMessage"]["from"] == "test:alice"
        assert plain["turn"] is None and plain["desktopVisibility"]["status"] == "unknown"


async def in_process(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tool: str, **arguments: Any) -> list[dict[str, Any]]:
    """Call ``tool`` in this process with ``env`` set (a server's second setting, after the
    real session of the same test), then list the receipts of a message it sent: ``[result,
    *receipts]``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = App.create()
    try:
        result = await call_tool(app, tool, **arguments)
        if tool != "message_agent":
            return [result]
        listed = await call_tool(app, "list_agent_link_receipts", messageId=result["messageId"], action="message_thread")
        return [result, *listed["data"]]
    finally:
        await app.aclose()


async def test_turn_id_from_the_environment_is_labelled_env(isolated_env: Path, thread: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**BASE, "CODEX_THREAD_ID": SENDER, "CODEX_TURN_ID": "turn-from-env"}
    async with agent_link_mcp(env) as client:
        sent = await client.call("message_agent", {"to": f"codex:{thread}", "message": "hi"})
        [receipt] = (await client.call("list_agent_link_receipts", {"messageId": sent["messageId"], "action": "message_thread"}))["data"]
        assert receipt["origin"]["turnId"] == "turn-from-env" and receipt["origin"]["sources"]["turnId"] == "env"
        assert receipt["origin"]["toolCallId"] is None  # never from the environment
    _, receipt = await in_process({**env, "AGENT_LINK_INFER_RECEIPT_ORIGIN": "0"}, monkeypatch, "message_agent",
                                  to=f"codex:{thread}", message="hi")
    assert receipt["origin"]["sources"]["turnId"] == "not_supplied"


async def test_receipt_filters_are_enums(isolated_env: Path) -> None:
    async with agent_link_mcp({**BASE, "AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        schema = (await alice.tools())["list_agent_link_receipts"].input_schema["properties"]
        assert {"launch_thread", "archive_thread", "model_switch", "effort_change", "cwd_change"} <= set(schema["action"]["enum"])
        assert {"fork", "reconcile", "model-switch", "effort-change", "cwd-change"} <= set(schema["kind"]["enum"])
        bad = await alice.call("list_agent_link_receipts", {"action": "launch"})
        assert bad["error"]["code"] == "invalid_arguments" and bad["error"]["details"]["errors"][0]["path"] == "action"


async def test_health_warns_when_the_installed_codex_differs(isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_codex.settings import VERIFIED_CODEX_VERSION

    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\necho 'codex-cli 0.0.1-test'\n")
    fake.chmod(0o755)
    async with agent_link_mcp({**BASE, "AGENT_LINK_CODEX_BIN": str(fake)}) as client:
        codex = (await client.call("agent_link_health"))["harnesses"]["codex"]
        assert codex["version"]["installed"] == "0.0.1-test" != VERIFIED_CODEX_VERSION
        desktop = codex["desktopPush"]
        assert desktop["verifiedCodexVersion"] == VERIFIED_CODEX_VERSION and desktop["installedCodexVersion"] == "0.0.1-test"
        assert [w["code"] for w in desktop["warnings"]] == ["codex_version_differs"] and codex["warnings"] == desktop["warnings"]
        skipped = (await client.call("agent_link_health", {"startAppServer": False}))["harnesses"]["codex"]
        assert skipped["version"]["probed"] is False and skipped["desktopPush"]["warnings"] == []
    [health] = await in_process({**BASE, "AGENT_LINK_CODEX_BIN": str(fake), "AGENT_LINK_CODEX_DESKTOP_PUSH": "shared-daemon"},
                                monkeypatch, "agent_link_health", startAppServer=False)
    desktop = health["harnesses"]["codex"]["desktopPush"]
    assert desktop["mode"] == "mailbox-only" and desktop["requested"] == "shared-daemon" and desktop["refused"] is True
    assert [w["code"] for w in desktop["warnings"]] == ["desktop_push_override_refused"]


def test_the_verified_codex_version_is_the_pinned_one() -> None:
    """Health's ``verifiedCodexVersion`` names the Codex the real-host tests run (it stayed on the previous pin once,
    so health warned every user of the current one that their Codex differs)."""
    import json
    from pathlib import Path

    from agent_link_codex.settings import VERIFIED_CODEX_VERSION

    pins = json.loads((Path(__file__).resolve().parents[3] / "hosts" / "package.json").read_text())["dependencies"]
    assert VERIFIED_CODEX_VERSION == pins["@openai/codex"]
