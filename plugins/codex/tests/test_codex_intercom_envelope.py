"""agent-session-intercom's v2 envelope: serialize, parse and validate (typed API)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from agent_link_codex.intercom import (
    HEADER,
    build_envelope_v2,
    check_sendable,
    parse_envelope_v2,
    serialize_envelope_v2,
)

from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import new_message_id

SENDER = {"scheme": "codex-thread", "endpointId": "ep_1234567890abcdef", "threadId": "sender-thread"}
GOOD: dict[str, Any] = {
    "protocol": "agent-session-intercom", "version": 2, "messageId": "16e66e8a-008c-4f09-86d7-dcaef30c7d36",
    "sentAt": "2026-08-14T17:30:00.000Z", "expiresAt": "2026-08-14T17:35:00.000Z", "correlationId": "job-7",
    "sender": {"kind": "codex-agent", "threadId": "sender-thread", "address": SENDER, "project": {"name": "reports"},
               "label": "reviewer"},
    "replyTo": dict(SENDER),
    "target": {"scheme": "codex-thread", "endpointId": "ep_abcdef1234567890", "threadId": "target-thread"},
    "content": {"type": "text", "text": "Please review the report."},
}


def test_round_trip() -> None:
    text = serialize_envelope_v2(GOOD)
    assert text.split("\n", 1)[0] == HEADER and json.loads(text.split("\n", 1)[1]) == GOOD
    assert parse_envelope_v2(text) == GOOD


def _broken(path: str, value: Any) -> dict[str, Any]:
    env = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = env
    for p in parents:
        node = node[p]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return env


@pytest.mark.parametrize(("path", "value", "reported"), [
    ("messageId", "not-a-uuid", "messageId"),
    ("sentAt", "yesterday", "sentAt"),
    ("expiresAt", "2026-08-14T17:00:00Z", "expiresAt"),  # before sentAt
    ("expiresAt", "2026-08-14T17:40:00", "expiresAt"),  # no zone
    ("replyTo", {**SENDER, "threadId": "someone-else"}, "replyTo"),
    ("target.endpointId", "/tmp/socket.sock", "target"),  # never a socket path
    ("sender.address", {**SENDER, "extra": 1}, "sender.address"),
    ("sender.project.name", " ", "sender.project.name"),
    ("content.text", "", "content.text"),
    ("correlationId", "", "correlationId"),
    ("protocol", "other", "protocol"),
    ("version", 1, "version"),
    ("sender.kind", KeyError, "sender.kind"),
])
def test_each_rule_is_enforced(path: str, value: Any, reported: str) -> None:
    env = _broken(path, value)
    with pytest.raises(AgentLinkError) as err:
        serialize_envelope_v2(env)
    assert err.value.code == "invalid_arguments"
    assert reported in [e["path"] for e in err.value.details["errors"]]
    with pytest.raises(AgentLinkError):
        parse_envelope_v2(HEADER + "\n" + json.dumps(env))


@pytest.mark.parametrize("text", ["", "{}", HEADER, HEADER + "\nnot json", "[other/v2]\n" + json.dumps(GOOD)])
def test_unparseable_text_is_refused(text: str) -> None:
    with pytest.raises(AgentLinkError) as err:
        parse_envelope_v2(text)
    assert err.value.code == "invalid_arguments"


def test_built_from_a_stored_message_keeps_the_uuid_and_the_sender_metadata() -> None:
    from ulid import ULID

    mid = new_message_id()
    message = {"id": mid, "from_addr": "codex:sender-thread", "recipient": "codex:target-thread", "sent_at": 1_800_000_000_000,
               "reply_by": None, "body": "hi", "metadata": {"expiresAt": 1_800_000_300_000, "fingerprint": {
                   "correlationId": "job-7", "senderProject": "reports", "senderLabel": "reviewer"}}}
    env = build_envelope_v2(message, sender_endpoint="ep_1234567890abcdef", target_endpoint="ep_abcdef1234567890")
    assert env["messageId"] == str(ULID.from_str(mid).to_uuid())
    assert env["sender"]["project"] == {"name": "reports"} and env["sender"]["label"] == "reviewer"
    assert env["correlationId"] == "job-7" and env["replyTo"] == env["sender"]["address"]
    assert env["expiresAt"] > env["sentAt"]
    with pytest.raises(AgentLinkError):  # an endpoint id is never anything but ep_...
        build_envelope_v2(message, sender_endpoint="/tmp/x.sock", target_endpoint="ep_abcdef1234567890")
    for sender, target in (("team:alice", "codex:t"), ("codex:t", "team:bob")):
        with pytest.raises(AgentLinkError) as err:
            check_sendable(sender, target)
        assert err.value.details["errors"][0]["path"] == "envelope"


def test_dispatch_errors_are_classified_for_retries() -> None:
    from agent_link_codex.api import classify_dispatch_error
    from agent_link_codex.appserver import (
        AppServerError,
        AppServerUnavailable,
        ConnectionLost,
    )

    assert classify_dispatch_error(AppServerError(-32001, "Server overloaded; retry later.", "turn/start")) == "retryable"
    assert classify_dispatch_error(AppServerError(-32600, "thread not found", "turn/start")) == "rejected"
    assert classify_dispatch_error(AppServerUnavailable("open-failed", "unix:///x")) == "retryable"
    assert classify_dispatch_error(ConnectionLost("connection-lost", "unix:///x", method="turn/start")) == "unknown"
    assert classify_dispatch_error(ConnectionLost("connection-lost", "unix:///x"), request_sent=False) == "retryable"
    assert classify_dispatch_error(AgentLinkError("upstream_error", "x", {"rpcCode": -32001})) == "retryable"
    assert classify_dispatch_error(AgentLinkError("codex_unavailable", "x", {"reason": "request-timeout"})) == "unknown"
    assert classify_dispatch_error(AgentLinkError("not_found", "x")) == "rejected"


def test_the_envelope_option_is_the_codex_plugins(isolated_env: Any) -> None:
    """``--envelope`` on ``send`` and ``reply`` comes with the codex plugin (before ``--from``); the core has none."""
    from agent_link_testing.cli_runner import invoke

    for command in ("send", "reply"):
        shown = invoke(command, "--help").stdout
        assert "--envelope [agent-link|intercom-v2]" in shown and shown.index("--envelope") < shown.index("  --from ")
        assert "--envelope" not in invoke(command, "--help", env={"AGENT_LINK_DISABLE_PLUGINS": "codex"}).stdout
    refused = invoke("send", "team:bob", "hi", "--envelope", "intercom-v2", "--from", "team:me")
    assert refused.exit_code == 2 and "intercom-v2" in refused.stderr  # no harness of team:bob shows it: nothing stored
    sent = invoke("send", "team:bob", "hi", "--envelope", "agent-link", "--from", "team:me", "--json")
    assert sent.exit_code == 0 and json.loads(sent.stdout)["outcome"] == "queued"
