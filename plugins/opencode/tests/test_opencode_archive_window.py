"""A send in the window between opencode archiving a session and the event saying so
(``OpencodeHarness._archived_after``): opencode still stores the prompt and runs the turn, so a
push that landed stays delivered with the warning ``opencode_session_archived``; a push that did
not land into a session now archived is ``archived``. Judged on the push's own look at the session
after it landed (``evidence.sessionArchived``), else on a look-up then. The real server's window:
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
    """A server's event stream that still holds a session's old record."""

    def __init__(self) -> None:
        self.forgotten: list[str] = []

    def forget(self, session_id: str) -> None:
        self.forgotten.append(session_id)


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


def landed(**evidence: Any) -> Delivery:
    return Delivery(delivered=True, via="opencode-prompt", state="delivered", evidence={"userMessageId": "msg_u", **evidence},
                    fields={"opencodeUserMessageId": "msg_u"})


async def test_the_pushs_own_look_tells_the_archive_and_the_stale_record_is_dropped(
        harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = looked_up(monkeypatch, harness, archived=False)
    harness._watches[URL] = watch = FakeWatch()
    harness._located["ses_w"] = (URL, 0.0)
    delivery = await harness._archived_after(landed(sessionArchived=True), MESSAGE, "ses_w", URL)
    assert delivery.delivered and delivery.evidence["sessionArchived"] is True
    assert [w["code"] for w in delivery.warnings] == ["opencode_session_archived"]
    assert asked == []  # no second look
    assert "ses_w" not in harness._located and watch.forgotten == ["ses_w"]  # the next send looks the session up


async def test_a_session_live_after_the_push_is_left_as_delivered(harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = looked_up(monkeypatch, harness, archived=True)
    harness._watches[URL] = watch = FakeWatch()
    delivery = await harness._archived_after(landed(sessionArchived=False), MESSAGE, "ses_w", URL)
    assert delivery.delivered and delivery.warnings == [] and asked == [] and watch.forgotten == []


@pytest.mark.parametrize("archived", [True, False])
async def test_without_the_pushs_look_the_session_is_looked_up_then(
        archived: bool, harness: OpencodeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = looked_up(monkeypatch, harness, archived=archived)
    accepted = Delivery(accepted=True, state="accepted_queued_in_session", evidence={"userMessageId": "msg_u"})
    delivery = await harness._archived_after(accepted, MESSAGE, "ses_w", URL)
    assert asked == ["ses_w"] and delivery.accepted and delivery.evidence["sessionArchived"] is archived
    assert [w["code"] for w in delivery.warnings] == (["opencode_session_archived"] if archived else [])


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
    assert [w["code"] for w in unknown.warnings] == ["opencode_push_unconfirmed"] and "sessionArchived" not in unknown.evidence
