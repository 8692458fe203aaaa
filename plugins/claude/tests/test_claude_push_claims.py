"""Push claims (agent_link_claude/push_claims.py): one at a time across processes, taken over
only from the claim named as dead, settled with what the push came to."""

from __future__ import annotations

from agent_link_claude.push_claims import claim_push, last_push_settled, settle_push
from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.model import Caller
from agent_link_core.records import OutgoingMessage


def test_one_push_claim_at_a_time_across_mailboxes() -> None:
    box, other = App.create(), App.create()  # two processes' connections to the same database
    try:
        mid = new_message_id()
        to = "claude:00000000-0000-0000-0000-000000000001"
        box.mailbox.store_message(OutgoingMessage(mid, Caller("test:alice", "explicit", "test"), to, to, "x", "reply", None, None))
        assert claim_push(box.mailbox, mid, {"pid": 1}) is None
        held = claim_push(other.mailbox, mid, {"pid": 2})
        assert held is not None and held["holder"] == {"pid": 1}
        assert claim_push(other.mailbox, mid, {"pid": 2}, replacing=held["seq"] + 1) is not None  # not the open claim
        assert claim_push(other.mailbox, mid, {"pid": 2}, replacing=held["seq"]) is None  # taken over (holder 1 died)
        assert last_push_settled(box.mailbox, mid) == {"outcome": "orphaned", "claim": held["seq"]}
        assert claim_push(box.mailbox, mid, {"pid": 3}, replacing=held["seq"]) is not None  # 2 holds it now
        settle_push(other.mailbox, mid, "delivered", {"via": "x"})
        assert last_push_settled(box.mailbox, mid) == {"outcome": "delivered", "via": "x"}
        assert claim_push(box.mailbox, mid, {"pid": 3}) is None
    finally:
        box.close()
        other.close()
