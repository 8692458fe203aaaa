"""The test kit's stub Messages API keeps one script per conversation when asked
(:meth:`agent_link_testing.messages_stub.MessagesStub.enqueue` with ``conversation=``).

Why it exists: a test that runs turns in several sessions of one host against one stub. With
the shared queue, a turn still in flight in the first session (its request after a tool result
not sent yet) takes the reply meant for the next session's first request: the next session's
model gets the first session's closing text and never calls its tool. The real-host opencode
approvals test in plugins/approvals did so under two workers: it went on once the tool had run,
before that follow-up request.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from agent_link_testing.messages_stub import MessagesStub, Reply

TOOLS = [{"name": "probe", "input_schema": {"type": "object"}}]  # a main request offers tools


def ask(stub: MessagesStub, messages: list[Any]) -> list[dict[str, Any]]:
    """One non-streamed ``POST /v1/messages`` offering a tool; the answer's content blocks."""
    body = json.dumps({"model": "m", "max_tokens": 10, "tools": TOOLS, "messages": messages}).encode()
    request = urllib.request.Request(stub.base_url + "/v1/messages", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        return list(json.loads(answer.read())["content"])


def opening(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_a_conversations_script_answers_only_its_own_requests_whatever_the_arrival_order() -> None:
    with MessagesStub(default_text="nothing left") as stub:
        stub.enqueue(Reply.tool_use("probe", {}, id="toolu_a"), "a is done", conversation="ses_a")
        stub.enqueue(Reply.tool_use("probe", {}, id="toolu_b"), "b is done", conversation="ses_b")
        stub.enqueue("shared")
        assert stub.pending_script == 5

        first_a = ask(stub, [opening("go ses_a")])
        assert [b.get("id") for b in first_a] == ["toolu_a"]
        # b's first request comes before a's follow-up: each still gets its own reply
        assert [b.get("id") for b in ask(stub, [opening("go ses_b")])] == ["toolu_b"]
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"}]}
        followed = ask(stub, [opening("go ses_a"), {"role": "assistant", "content": first_a}, result])
        assert followed == [{"type": "text", "text": "a is done"}]
        # a request of no conversation takes the shared queue, never a conversation's script
        assert ask(stub, [opening("something else")]) == [{"type": "text", "text": "shared"}]
        # a conversation whose script ran out gets the default text, not the shared queue's next
        stub.enqueue("for whoever asks next")
        assert ask(stub, [opening("go ses_a")]) == [{"type": "text", "text": "nothing left"}]
        assert [r.first_user_text() for r in stub.unscripted] == ["go ses_a"]
        assert stub.pending_script == 2  # "b is done" and the shared one


def test_a_body_whose_messages_are_not_objects_still_gets_the_shared_script() -> None:
    with MessagesStub() as stub:
        stub.enqueue("mine", conversation="ses_a")
        stub.enqueue("shared")
        assert ask(stub, ["not an object", opening("go ses_b")]) == [{"type": "text", "text": "shared"}]
        assert stub.requests_of("main")[0].first_user_text() == "go ses_b"


def test_an_empty_conversation_marker_is_refused() -> None:
    with MessagesStub() as stub, pytest.raises(ValueError, match="non-empty"):
        stub.enqueue("x", conversation="")
