"""``agent-link receipts`` / ``agent-link receipts export --jsonl``, and list_agent_link_receipts
through a real MCP client session."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.model import Caller
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.tool_app import call_tool

ALICE = Caller("test:alice", "config", "test")


def cli(*args: str) -> Any:
    return CliRunner().invoke(build_cli(), list(args))


@pytest.mark.anyio
async def test_cli_lists_and_exports(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app: App = make_app(AGENT_LINK_ADDRESS="test:alice")  # the CLI lists what its caller sent or received
    for text in ("first <one>", "second", "third"):
        await app.send(caller=ALICE, to="test:bob", body=text, arguments={"receipt": {"purpose": f"p-{text[:5]}"}})
    listed = cli("receipts", "--json", "--limit", "2")
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.output)
    assert [r["messagePreview"] for r in data["data"]] == ["third", "second"] and data["scannedReceipts"] == 3
    filtered = json.loads(cli("receipts", "--json", "--query", "P-FIRST").output)
    assert [r["messagePreview"] for r in filtered["data"]] == ["first &lt;one&gt;"]
    human = cli("receipts", "--target", "test:bob")
    assert human.exit_code == 0 and len(human.output.splitlines()) == 3 and "message_agent" in human.output
    assert "No receipts match" in cli("receipts", "--action", "fork_thread").output
    export = cli("receipts", "export", "--jsonl")
    assert export.exit_code == 0
    lines = [json.loads(line) for line in export.output.splitlines()]
    assert [r["messagePreview"] for r in lines] == ["first &lt;one&gt;", "second", "third"]  # oldest first
    assert lines == list(reversed(json.loads(cli("receipts", "--json").output)["data"]))
    no_format = cli("receipts", "export")
    assert no_format.exit_code == 2 and "--jsonl" in no_format.output
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:eve")  # a third party sees none of it
    assert json.loads(cli("receipts", "--json").output)["data"] == []
    assert cli("receipts", "export", "--jsonl").output == ""
    refused = cli("receipts", "--all")
    assert refused.exit_code == 1 and "AGENT_LINK_INSPECT_ALL" in refused.output
    monkeypatch.setenv("AGENT_LINK_INSPECT_ALL", "1")
    assert len(json.loads(cli("receipts", "--json", "--all").output)["data"]) == 3


@pytest.mark.anyio
async def test_people_read_the_words_not_the_envelopes_escapes(make_app: Any) -> None:
    app: App = make_app(AGENT_LINK_ADDRESS="test:alice")
    await app.send(caller=ALICE, to="test:bob", body="if a < b && c > d:\n\tbell\a rlo\u202eevil\u200b esc\x1b[2J",
                   arguments={"receipt": {"purpose": "p"}})
    await app.send(caller=ALICE, to="test:bob", body="x", arguments={"receipt": {"purpose": "fix <b> & \u202eevil"}})
    # the script's JSON keeps the escaped preview; the people's line shows the words, terminal-safe and on one line
    assert json.loads(cli("receipts", "--json").output)["data"][1]["messagePreview"].startswith("if a &lt; b &amp;&amp; c &gt; d:")
    shown = cli("receipts").output
    lines = shown.splitlines()
    assert len(lines) == 2 and lines[1].endswith("if a < b && c > d: bell\\u{0007} rlo\\u{202E}evil\\u{200B} esc\\u{001B}[2J"), shown
    assert "&lt;" not in shown and "&amp;" not in shown and "&#x" not in shown
    assert all(line.isprintable() for line in lines)


def test_people_text_undoes_only_the_escaping() -> None:
    from agent_link_core.envelope import escape_text
    from agent_link_receipts.cli import people_text

    for raw in ("a <b> & c &lt; &#x41; \\u{41}", "\u202e\u200b\a\x1b x", "line\nbreak\ttab"):
        assert people_text(escape_text(raw)) == " ".join(raw.split())


def env(address: str) -> dict[str, str]:
    return {"AGENT_LINK_ADDRESS": address, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"}


@pytest.mark.anyio
async def test_receipts_over_mcp(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with AsyncExitStack() as stack:
        alice = await stack.enter_async_context(agent_link_mcp(env("test:alice")))
        bob = await stack.enter_async_context(agent_link_mcp(env("test:bob")))
        tools = await alice.tools()
        assert tools["list_agent_link_receipts"].annotations.read_only_hint is True

        sent = await alice.call("message_agent", {
            "to": "test:bob", "message": "Is the invoice API live?", "anticipation": "reply",
            "receipt": {"purpose": "release check", "tags": ["release"], "originTurnId": "turn-7"},
        })
        assert sent["ok"] and sent["receipt"]["recorded"] is True
        quiet = await alice.call("message_agent", {"to": "test:bob", "message": "not audited", "receipt": {"record": False}})
        assert quiet["receipt"] == {"record": False, "recorded": False, "id": None}
        await bob.call("read_agent_link_inbox")
        answered = await bob.call("reply_agent_link_message", {"messageId": sent["messageId"], "message": "Yes."})
        assert answered["receipt"]["recorded"] is True

        mine = await bob.call("list_agent_link_receipts", {"messageId": sent["messageId"]})
        kinds = [(r["action"], r["kind"]) for r in mine["data"]]
        assert kinds == [("message_status", "resolution"), ("message_status", "delivery"), ("message_agent", None)]
        first = mine["data"][-1]
        assert first["id"] == sent["receipt"]["id"] and first["origin"]["turnId"] == "turn-7"
        assert first["origin"]["sources"]["turnId"] == "caller_supplied"
        # The message id is the core's ULID schema: either case finds it, a 27th bit is refused.
        lower = await bob.call("list_agent_link_receipts", {"messageId": sent["messageId"].lower()})
        assert lower["data"] == mine["data"] and lower["filters"]["messageId"] == sent["messageId"]
        overflow = await bob.call("list_agent_link_receipts", {"messageId": "8" + sent["messageId"][1:]})
        assert overflow["error"]["code"] == "invalid_arguments"
        assert [e["path"] for e in overflow["error"]["details"]["errors"]] == ["messageId"]
        assert (await alice.call("list_agent_link_receipts", {"query": "NOT AUDITED"}))["data"] == []
        replies = await alice.call("list_agent_link_receipts", {"action": "reply_message"})
        assert [r["messageId"] for r in replies["data"]] == [answered["messageId"]]
        bogus = await alice.call("list_agent_link_receipts", {"bogus": 1})
        assert bogus["error"]["code"] == "invalid_arguments"
        health = await alice.call("agent_link_health")
        assert health["sections"]["receipts"]["count"] == 4
    # A third party (in this process): nothing of alice's and bob's mail; every receipt only with inspect-all.
    for name, value in env("test:eve").items():
        monkeypatch.setenv(name, value)
    eve = App.create()
    try:
        assert (await call_tool(eve, "list_agent_link_receipts", query="invoice"))["data"] == []
        refused = await call_tool(eve, "list_agent_link_receipts", scope="all")
        assert refused["error"]["code"] == "permission_denied" and refused["error"]["details"] == {"reason": "inspect_all_disabled"}
    finally:
        await eve.aclose()
    monkeypatch.setenv("AGENT_LINK_INSPECT_ALL", "1")
    admin = App.create()
    try:
        assert len((await call_tool(admin, "list_agent_link_receipts", scope="all"))["data"]) == 4
    finally:
        await admin.aclose()
