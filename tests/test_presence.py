"""Suggestions for an unknown plain address name only addresses a send reaches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core import api, presence
from agent_link_core.app import App
from agent_link_core.mailbox import OutgoingMessage, new_message_id
from agent_link_core.model import Caller


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    made = App.create()
    yield made
    made.close()


def signed(app: App, sender: str) -> None:
    """Store a message that ``sender`` signed (as ``send --from`` does); nobody reads as it."""
    msg = OutgoingMessage(id=new_message_id(), sender=Caller(sender, "explicit"), to="team:zed", recipient="team:zed",
                          body="x", anticipation="fyi", reply_by_ms=None, reply_to=None)
    app.mailbox.store_message(msg)


def test_only_served_addresses_and_harness_sessions_are_suggested(app: App) -> None:
    presence.record(app.store, "team:bob", "inbox")
    signed(app, "team:bobby")  # only ever a sender
    signed(app, "sx:bobby")  # a session of an installed harness: the harness delivers to it
    api.add_contact(app, "robert", "team:boby")  # a contact nobody ever served
    assert set(presence.known_addresses(app.store)) >= {"team:bob", "team:bobby", "sx:bobby", "team:boby"}
    assert presence.reachable_addresses(app.store) == ["team:bob"]
    assert presence.reachable_addresses(app.store, {"sx"}) == ["sx:bobby", "team:bob"]
    assert presence.suggestions(app.store, "team:bobb") == ["team:bob"]
    assert presence.suggestions(app.store, "tx:bobby", harnesses={"sx"})[0] == "sx:bobby"
    warning = presence.unseen_warning(app.store, "team:bobb")
    assert warning["details"]["suggestions"] == ["team:bob"] and "Did you mean team:bob?" in warning["message"]
