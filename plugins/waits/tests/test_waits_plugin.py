"""The waits plugin's own rules: its settings, and the note a ``waitForReply`` send makes before its message is stored
(it lapses unless a wait takes it over)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_waits import waits
from agent_link_waits.waits import waits_of


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    made = App.create({**os.environ, "AGENT_LINK_ADDRESS": "team:alice"})
    yield made
    made.close()


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("AGENT_LINK_WAIT_CAP_MS", "5", "expected a whole number from 1000 to 600000"),
    ("AGENT_LINK_WAIT_PROGRESS_MS", "soon", "expected a whole number from 1000 to 60000"),
])
def test_a_bad_wait_setting_is_refused_naming_it(isolated_env: Path, name: str, value: str, expected: str) -> None:
    with pytest.raises(AgentLinkError) as info:
        App.create({**os.environ, name: value})
    assert info.value.code == "invalid_arguments" and name in info.value.message and expected in info.value.message


def test_the_wait_settings_set_the_cap_and_the_progress_interval(isolated_env: Path) -> None:
    made = App.create({**os.environ, "AGENT_LINK_WAIT_CAP_MS": "2000", "AGENT_LINK_WAIT_PROGRESS_MS": "1500"})
    try:
        assert waits_of(made).wait_limits() == (2000, 1500)
    finally:
        made.close()


def test_a_note_no_wait_takes_over_lapses_and_one_a_wait_takes_runs_its_time(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """A waitForReply send whose wait never starts (its push outlasted the call, no session to wait on) holds the
    answer only for HOLD_MS; the wait that takes a note over renews it for the whole wait (MAX_WAIT_MS)."""
    taken, left = "01J00000000000000000000001", "01J00000000000000000000002"
    here = waits_of(app)
    here.hold("team:alice", taken)
    here.hold("team:alice", left)
    assert waits.live_keys(app.store, "team:alice") == {f"reply:{taken}", f"reply:{left}"}
    waits.renew(app.store, here.holds.pop(taken)[0])  # what a wait on `taken` does as it starts
    start = waits.now_ms()  # after both holds and the renewal: each expiry is at most this + its span
    monkeypatch.setattr(waits, "now_ms", lambda: start + waits.HOLD_MS + 1)
    assert waits.live_keys(app.store, "team:alice") == {f"reply:{taken}"}
    monkeypatch.setattr(waits, "now_ms", lambda: start + waits.MAX_WAIT_MS + 1)
    assert waits.live_keys(app.store, "team:alice") == set()


def test_a_resend_under_the_same_id_keeps_one_note(app: App) -> None:
    """An idempotent retry of a waitForReply send passes agent_link_before_send again: the note is renewed, not doubled."""
    here = waits_of(app)
    here.hold("team:alice", "01J00000000000000000000003")
    here.hold("team:alice", "01J00000000000000000000003")
    assert app.store.conn.execute("SELECT COUNT(*) FROM active_waits").fetchone()[0] == 1 and len(here.holds) == 1


@pytest.mark.anyio
async def test_a_host_plugins_wait_runs_with_this_plugin_turned_off(isolated_env: Path) -> None:
    """The Codex and Claude plugins wait through waits_of(app) even when AGENT_LINK_DISABLE_PLUGINS names waits: no
    active_waits table then, so the wait notes nothing, holds nothing, and still ends (here by its time limit)."""
    made = App.create({**os.environ, "AGENT_LINK_ADDRESS": "team:alice", "AGENT_LINK_DISABLE_PLUGINS": "waits"})
    try:
        me = made.caller()
        sent = await made.send(caller=me, to="team:bob", body="ready?", anticipation="reply")
        got = await waits_of(made).wait(caller=me, agent="team:bob", reply_to=sent.message["id"], timeout_ms=300, poll_ms=250)
        assert got["outcome"] == "timeout" and waits_of(made).wait_limits() == (50_000, 10_000)
        assert made.hooks.held_messages("team:alice") == set()
    finally:
        made.close()
