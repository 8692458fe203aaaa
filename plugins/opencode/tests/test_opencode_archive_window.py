"""A send in the window between opencode archiving a session and the event saying so
(``OpencodeHarness._archived_after``): opencode still stores the prompt and runs the turn, so a
push that landed stays delivered with the warning ``opencode_session_archived``; a push that did
not land into a session now archived is ``archived``. Judged from the event stream once it
carried the pushed user message, else from a look-up after the push. The real server's window:
``test_opencode_realhost_delivery.py``."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery
from agent_link_core.model import Session
from agent_link_opencode.harness import OpencodeHarness

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9"
MESSAGE = {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "recipient": "opencode:ses_w"}


class FakeWatch:
    """What a server's event stream knows: the user messages it carried and session records."""

    def __init__(self, seen: set[str], records: dict[str, dict[str, Any]]) -> None:
        self.connected = True
        self._seen, self.records = seen, records

    def seen(self, message_id: str) -> bool:
        return message_id in self._seen

    def get(self, session_id: str) -> tuple[dict[str, Any], str] | None:
        record = self.records.get(session_id)
        return (record, "busy") if record is not None else None


def session(archived: bool) -> Session:
    return Session(address="opencode:ses_w", harness="opencode", id="ses_w", archived=archived)


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> OpencodeHarness:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
    monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", URL)
    found = App.create().harnesses["opencode"]
    assert isinstance(found, OpencodeHarness)
    return found


def looked_up(monkeypatch: pytest.MonkeyPatch, harness: OpencodeHarness, archived: bool | None) -> list[str]:
    """``_locate`` answers the session (archived or not; None: gone); returns the ids asked for."""
    asked: list[str] = []

    async def locate(session_id: str) -> tuple[Session, str] | None:
        asked.append(session_id)
        return None if archived is None else (session(archived), URL)

    monkeypatch.setattr(harness, "_locate", locate)
    return asked


def landed() -> Delivery:
    return Delivery(delivered=True, via="opencode-prompt", state="delivered", evidence={"userMessageId": "msg_u"},
                    fields={"opencodeUserMessageId": "msg_u"})


async def test_the_stream_that_carried_the_push_tells_the_archive_without_a_look_up(
        harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = looked_up(monkeypatch, harness, archived=False)
    harness._watches[URL] = FakeWatch({"msg_u"}, {"ses_w": {"id": "ses_w", "time": {"created": 1, "archived": 5}}})
    harness._located["ses_w"] = (URL, 0.0)
    delivery = await harness._archived_after(landed(), MESSAGE, "ses_w", URL)
    assert delivery.delivered and delivery.evidence["sessionArchived"] is True
    assert [w["code"] for w in delivery.warnings] == ["opencode_session_archived"]
    assert asked == [] and "ses_w" not in harness._located  # the next send looks the session up


async def test_a_session_the_stream_shows_live_after_the_push_is_left_as_delivered(
        harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = looked_up(monkeypatch, harness, archived=True)
    harness._watches[URL] = FakeWatch({"msg_u"}, {"ses_w": {"id": "ses_w", "time": {"created": 1}}})
    delivery = await harness._archived_after(landed(), MESSAGE, "ses_w", URL)
    assert delivery.delivered and delivery.warnings == [] and "sessionArchived" not in delivery.evidence and asked == []


@pytest.mark.parametrize("watch", ["none", "not_seen", "closed"])
async def test_without_the_streams_word_the_session_is_looked_up_after_the_push(
        watch: str, harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_opencode import harness as module

    monkeypatch.setattr(module, "SEEN_WAIT_S", 0.05)
    asked = looked_up(monkeypatch, harness, archived=True)
    if watch != "none":  # a stream that never carried the push, or closed: its records are not trusted
        harness._watches[URL] = fake = FakeWatch(set(), {"ses_w": {"id": "ses_w", "time": {"created": 1}}})
        fake.connected = watch != "closed"
    delivery = await harness._archived_after(landed(), MESSAGE, "ses_w", URL)
    assert asked == ["ses_w"] and delivery.delivered and delivery.evidence["sessionArchived"] is True
    assert [w["code"] for w in delivery.warnings] == ["opencode_session_archived"]


async def test_a_push_that_did_not_land_into_a_session_now_archived_is_archived(
        harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up(monkeypatch, harness, archived=True)
    failed = Delivery(warnings=[{"code": "opencode_push_refused", "message": "HTTP 500"}])
    with pytest.raises(AgentLinkError) as refused:
        await harness._archived_after(failed, MESSAGE, "ses_w", URL)
    assert refused.value.code == "archived" and refused.value.details == {"address": "opencode:ses_w"}


@pytest.mark.parametrize("archived", [False, None])
async def test_a_push_that_did_not_land_into_a_live_or_gone_session_keeps_its_outcome(
        archived: bool | None, harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = looked_up(monkeypatch, harness, archived=archived)
    unknown = Delivery(unknown=True, warnings=[{"code": "opencode_push_unconfirmed", "message": "not shown"}])
    assert await harness._archived_after(unknown, MESSAGE, "ses_w", URL) is unknown and asked == ["ses_w"]
    assert [w["code"] for w in unknown.warnings] == ["opencode_push_unconfirmed"]
