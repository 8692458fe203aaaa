"""Inbox reads a real Claude Code session shows in full (pinned 2.1.197, stub model).

Measured: Claude Code gives the model ``JSON.stringify(structuredContent)`` of an MCP result; a
result above about 50,000 characters is replaced by a 2 KB preview and a file path ("Output too
large … Preview (first 2KB)"), and one near 100,000 by an error. Both hide mail the inbox would
have marked delivered. Here the stub model reads its inbox until ``more`` is empty: a 60 KB
message comes in pages, ten 20 KB messages in several reads, every tool result reaches the
model whole, and each message is marked delivered once, when all of it was returned.

Channel events are held to their own measured budget: an envelope of about 112,000 characters
(a 59 KB body full of markup, which escaping doubles) reaches the model whole as a new turn.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from agent_link_claude.channel import CHANNEL_BUDGET_BYTES
from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply

from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(300)]

TOOL = "mcp__plugin_agent-link_codex-agent-link__read_agent_link_inbox"
ALICE = Caller("test:alice", "config", "test")
RUN_TIMEOUT_S = 180.0


@pytest.fixture
def stub():
    with MessagesStub() as s:
        yield s


@pytest.fixture
def claude(installed: Any, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch) -> ClaudeHost:
    host = installed.host(stub=stub)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    return host


def shown(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def read_until_done(request: RecordedRequest) -> Reply | str:
    """The model: reads its inbox, follows `more` (pages by offset), then ends the turn."""
    results = request.tool_results()
    if not results:
        return Reply.tool_use(TOOL, {})
    result = json.loads(shown(results[-1]))
    if not result.get("more"):
        return "all read"
    page = result.get("page") or {}
    if page.get("nextOffset") is not None:
        return Reply.tool_use(TOOL, {"messageId": page["messageId"], "offset": page["nextOffset"]})
    return Reply.tool_use(TOOL, {})


def body_of(size: int, tag: str) -> str:
    line = f"{tag}: a line of a long report, with numbers 0123456789 and words.\n"
    return (line * (size // len(line) + 1))[: size - 4] + "\nEND"


def test_a_60_kb_message_and_ten_20_kb_messages_reach_the_model_whole(claude: ClaudeHost, stub: MessagesStub,
                                                                      tmp_path: Path) -> None:
    cwd = tmp_path / "b"
    cwd.mkdir()
    stub.enqueue("Ready.")
    done = claude.run_p("hello", cwd=cwd, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    session = claude.session_of(done, cwd=cwd).session_id
    to = f"claude:{session}"
    app = App.create()
    try:
        ids = []
        for n, size in enumerate([60_000] + [20_000] * 10):
            row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, to, to, body_of(size, f"m{n}"), "fyi",
                                                               None, None))
            ids.append(row["id"])
        envelopes = {i: app.mailbox.envelope(app.mailbox.get_row(i)) for i in ids}
        stub.enqueue(*([read_until_done] * 20))
        done = claude.run_p("read your messages", cwd=cwd, args=["--resume", session], timeout_s=RUN_TIMEOUT_S)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["result"] == "all read"
        results = [shown(r.tool_results()[-1]) for r in stub.main_requests if r.tool_results()]
        marked: list[str] = []
        pages: list[str] = []
        for text in results:
            assert not text.startswith(("<persisted-output>", "Error:")), text[:300]  # the model saw it whole
            result = json.loads(text)
            if result["page"] is not None:
                assert result["page"]["messageId"] == ids[0]
                pages.append(result["renderedBlock"])
            else:
                for message_id in result["markedDelivered"]:
                    assert envelopes[message_id] in result["renderedBlock"]
            marked += result["markedDelivered"]
        assert len(pages) >= 2 and "".join(pages) == envelopes[ids[0]]  # read in pages, all of it
        assert len(results) >= len(pages) + 3  # ten 20 KB messages do not fit one read either
        assert marked == ids  # each once, oldest first, the paged one after its last page
        assert all(app.mailbox.get_row(i)["first_delivered_at"] is not None for i in ids)
    finally:
        app.close()


CHANNEL_FLAGS = {"cachedGrowthBookFeatures": {"tengu_harbor": True,
                                              "tengu_harbor_ledger": [{"marketplace": "agent-link", "plugin": "agent-link"}]}}


def channel_text(request: RecordedRequest, message_id: str) -> str | None:
    for message in request.messages:
        for block in message.get("content") if message.get("role") == "user" and isinstance(message.get("content"), list) else []:
            text = block.get("text", "") if isinstance(block, dict) else ""
            if text.startswith("<channel ") and f'message_id="{message_id}"' in text:
                return text
    return None


def test_a_channel_event_up_to_the_budget_reaches_the_model_whole(installed: Any, stub: MessagesStub,
                                                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host = installed.host(stub=stub, outbound="blackhole")  # channels need the feature-flag cache
    host.update_global_config(CHANNEL_FLAGS)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = tmp_path / "live"
    cwd.mkdir()
    app = App.create()
    try:
        stub.enqueue("First turn done.", "Saw it.")
        # the host's own inbox socket switched off: with it, senders push there, not to the channel
        with host.start_stream(cwd=cwd, args=["--channels", "plugin:agent-link@agent-link"],
                               env_extra={"CLAUDE_CODE_HARBOR_KITE": "0"}) as stream:
            stream.send("hello")
            [first] = stream.wait_results(1, RUN_TIMEOUT_S)
            sid = first["session_id"]
            deadline = time.monotonic() + 30
            while sid not in app.harnesses["claude"].channel_sessions():
                assert time.monotonic() < deadline, "the channel bridge did not register"
                time.sleep(0.2)
            body = "".join(f"<p>{i:06d} & x</p>\n" for i in range(3_340))[:59_000]
            row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, f"claude:{sid}", f"claude:{sid}", body,
                                                               "fyi", None, None))
            envelope = app.mailbox.envelope(row)
            assert 100_000 < len(envelope.encode()) <= CHANNEL_BUDGET_BYTES
            stream.wait_results(2, RUN_TIMEOUT_S)
        text = channel_text(stub.main_requests[-1], row["id"])
        assert text is not None and envelope in text  # whole, not cut
        assert app.mailbox.get_row(row["id"])["delivered_via"] == "channel"
    finally:
        app.close()
