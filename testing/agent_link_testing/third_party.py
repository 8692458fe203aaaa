"""Mail between two agents that a third party must never read, for the walks that prove one
read rule holds on every read path (the MCP tools and CLI in tests/test_third_party.py, the web
page in plugins/web/tests/test_web_privacy.py).

Every secret text holds one of :data:`SECRETS`; a walk fails when any of them shows up.
"""

from __future__ import annotations

from agent_link_core.app import App
from agent_link_core.model import Caller

__all__ = ["ALICE", "BOB", "SECRETS", "mail_between_alice_and_bob"]

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")
SECRETS = ("SECRET-BODY-alpha", "SECRET-REASON-beta", "SECRET-NOTE-gamma", "SECRET-REPLY-delta", "SECRET-PURPOSE-eps")


async def mail_between_alice_and_bob(app: App, decline_reason: str = "SECRET-REASON-beta") -> dict[str, str]:
    """Alice's mail to bob, resolved every way: a body, a decline reason (``decline_reason``,
    which must hold ``SECRET-REASON-beta``), a done note, a reply and a receipt's purpose.

    :returns: message ids by key: ``declined``, ``done``, ``replied``.
    """
    ids = {}
    for key, anticipation in (("declined", "reply"), ("done", "action"), ("replied", "reply")):
        sent = await app.send(caller=ALICE, to="test:bob", body=f"SECRET-BODY-alpha {key}", anticipation=anticipation,
                              arguments={"receipt": {"purpose": "SECRET-PURPOSE-eps", "tags": ["SECRET-PURPOSE-eps"]}})
        ids[key] = sent.message["id"]
    app.inbox(BOB)
    await app.reply(caller=BOB, message_id=ids["declined"], resolution="decline", message=decline_reason)
    await app.reply(caller=BOB, message_id=ids["done"], resolution="done", message="SECRET-NOTE-gamma")
    await app.reply(caller=BOB, message_id=ids["replied"], message="SECRET-REPLY-delta")
    return ids
