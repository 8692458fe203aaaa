"""The people-and-scripts CLI and its typed API: send outcomes, idempotency, retries, reply,
status (wait: plugins/waits/tests; sessions, contacts, who, find: plugins/listings/tests)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_link_core import cli as cli_mod
from agent_link_core.app import App
from agent_link_core.commands.send import send_reliably
from agent_link_core.harness import SessionListing
from agent_link_core.model import Caller, Session
from agent_link_core.mailbox import new_message_id
from agent_link_testing.cli_plugins import add_cli_plugins
from agent_link_testing.cli_runner import invoke as run
from agent_link_testing.harnesses import HarnessPlugin, ScriptedHarness


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> ScriptedHarness:
    h = ScriptedHarness("sx", ("ok", "busy", "lost", "quiet", "same"))
    other = ScriptedHarness("sy", ("same", "only-y"))
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    add_cli_plugins(monkeypatch, HarnessPlugin(h, other))
    return h


def out_json(result: Any) -> dict[str, Any]:
    return json.loads(result.stdout)


def test_send_outcomes_and_exit_codes(harness: ScriptedHarness) -> None:
    delivered = run("send", "sx:ok", "hello", "--from", "team:me", "--json")
    assert delivered.exit_code == 0 and out_json(delivered)["outcome"] == "delivered"
    queued = run("send", "sx:quiet", "hello", "--from", "team:me", "--json")
    assert queued.exit_code == 0 and out_json(queued)["outcome"] == "queued"
    unknown = run("send", "sx:lost", "hello", "--from", "team:me", "--json")
    assert unknown.exit_code == cli_mod.EXIT_UNKNOWN and out_json(unknown)["outcome"] == "unknown"
    rejected = run("send", "sx:nobody", "hello", "--from", "team:me", "--json")
    assert rejected.exit_code == 1 and out_json(rejected)["outcome"] == "rejected"
    assert out_json(rejected)["error"]["code"] == "not_found"


def test_bare_ids_need_a_unique_complete_match(harness: ScriptedHarness) -> None:
    assert out_json(run("send", "only-y", "hi", "--from", "team:me", "--json"))["to"] == "sy:only-y"
    ambiguous = run("send", "same", "hi", "--from", "team:me", "--json")
    assert ambiguous.exit_code == 1 and out_json(ambiguous)["error"]["code"] == "ambiguous"


@pytest.mark.anyio
async def test_incomplete_scan_refuses_a_bare_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    app = App.create(extra_plugins=(HarnessPlugin(ScriptedHarness("sz", ("x",), complete=False)),))
    try:
        result = await send_reliably(app, "y", "hi", sender=Caller("team:me", "explicit"))
        assert result.outcome == "rejected" and result.error["code"] == "sz_unavailable"
    finally:
        app.close()


def test_same_id_same_text_stores_once_and_offers_a_queued_message_again(harness: ScriptedHarness) -> None:
    mid = new_message_id()
    first = out_json(run("send", "sx:quiet", "hello", "--message-id", mid, "--from", "team:me", "--json"))
    again = out_json(run("send", "sx:quiet", "hello", "--message-id", mid, "--from", "team:me", "--json"))
    # still queued after the first attempt: the resend offers it to the harness once more
    assert first["outcome"] == again["outcome"] == "queued" and again["duplicate"] and again["attempts"] == 1
    assert harness.pushes.count(mid) == 2
    delivered = new_message_id()
    run("send", "sx:ok", "hello", "--message-id", delivered, "--from", "team:me")
    resent = out_json(run("send", "sx:ok", "hello", "--message-id", delivered, "--from", "team:me", "--json"))
    assert resent["outcome"] == "delivered" and resent["attempts"] == 0 and harness.pushes.count(delivered) == 1
    changed = run("send", "sx:quiet", "other text", "--message-id", mid, "--from", "team:me", "--json")
    assert changed.exit_code == 1 and out_json(changed)["outcome"] == "rejected"
    # in words: nothing of this send was sent (it printed the taken id, as if that message had been rejected)
    said = run("send", "sx:quiet", "other text", "--message-id", mid, "--from", "team:me")
    assert said.exit_code == 1 and said.stdout.startswith("rejected: nothing sent to sx:quiet\n"), said.stdout


def test_unknown_is_not_resent_without_retry_unknown(harness: ScriptedHarness) -> None:
    mid = new_message_id()
    run("send", "sx:lost", "hello", "--message-id", mid, "--from", "team:me")
    again = run("send", "sx:lost", "hello", "--message-id", mid, "--from", "team:me", "--json")
    assert out_json(again)["outcome"] == "unknown" and harness.pushes.count(mid) == 1
    retried = run("send", "sx:lost", "hello", "--message-id", mid, "--from", "team:me", "--retry-unknown", "--json")
    assert out_json(retried)["attempts"] == 1 and harness.pushes.count(mid) == 2


def test_only_pre_acceptance_failures_are_retried(harness: ScriptedHarness) -> None:
    no_retry = out_json(run("send", "sx:busy", "a", "--from", "team:me", "--json"))
    assert no_retry["outcome"] == "queued" and no_retry["attempts"] == 1
    harness.busy_left = 2
    retried = out_json(run("send", "sx:busy", "b", "--from", "team:me", "--retry-count", "3", "--retry-delay-ms", "1", "--json"))
    assert retried["outcome"] == "delivered" and retried["attempts"] == 3
    lost = out_json(run("send", "sx:lost", "c", "--from", "team:me", "--retry-count", "3", "--retry-delay-ms", "1", "--json"))
    assert lost["attempts"] == 1  # an unknown outcome is never retried automatically


def test_a_bare_id_a_listing_leaves_out_is_found_by_exact_lookup(harness: ScriptedHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session the listing leaves out (a Codex thread with no turn yet) is still reached by its
    exact id: the harness's own lookup is asked before the send is refused."""
    listed = harness.list_sessions

    async def without_ok(*, include_archived: bool = False, limit: int = 200) -> SessionListing:
        full = await listed(include_archived=include_archived, limit=limit)
        return SessionListing([s for s in full.sessions if s.id != "ok"], full.provider, complete=True)

    async def lookup(session_id: str) -> Session | None:
        return next((s for s in (await listed()).sessions if s.id == session_id), None)

    monkeypatch.setattr(harness, "list_sessions", without_ok)
    monkeypatch.setattr(harness, "get_session", lookup)
    sent = out_json(run("send", "ok", "hello", "--from", "team:me", "--json"))
    assert sent["outcome"] == "delivered" and sent["to"] == "sx:ok"
    missing = run("send", "nobody-has-this", "x", "--from", "team:me", "--json")
    assert out_json(missing)["error"]["code"] == "not_found"


def test_the_pushed_message_carries_the_ttl_expiry(harness: ScriptedHarness) -> None:
    """The envelope a target reads is built at the push: the expiry --ttl-ms sets is stored
    before it (not after, when the envelope already said the default day)."""
    from agent_link_core.mailbox import parse_iso_ms

    sent = out_json(run("send", "sx:ok", "x", "--ttl-ms", "300000", "--from", "team:me", "--json"))
    assert sent["outcome"] == "delivered" and harness.expiries == [parse_iso_ms(sent["expiresAt"], "expiresAt")]
    plain = out_json(run("send", "sx:ok", "y", "--from", "team:me", "--json"))
    assert plain["expiresAt"] is None and harness.expiries[-1] is None


def test_ttl_counts_from_the_first_attempt(harness: ScriptedHarness) -> None:
    mid = new_message_id()
    first = out_json(run("send", "sx:lost", "x", "--message-id", mid, "--ttl-ms", "1", "--from", "team:me", "--json"))
    assert first["expiresAt"]
    import time

    time.sleep(0.01)
    late = run("send", "sx:lost", "x", "--message-id", mid, "--ttl-ms", "1", "--from", "team:me", "--retry-unknown", "--json")
    assert out_json(late)["outcome"] == "rejected" and out_json(late)["expiresAt"] == first["expiresAt"]
    # The TTL defines the message: a longer one under the same id is another message, refused.
    longer = out_json(run("send", "sx:lost", "x", "--message-id", mid, "--ttl-ms", "999999", "--from", "team:me", "--json"))
    assert longer["outcome"] == "rejected" and longer["error"]["details"]["errors"][0]["rule"] == "idempotency"


@pytest.mark.installed_plugins("waits")
def test_reply_status_wait_round_trip(harness: ScriptedHarness) -> None:
    sent = out_json(run("send", "sx:quiet", "question?", "--anticipation", "reply", "--from", "team:me", "--json"))
    mid = sent["messageId"]
    wrong = run("reply", mid, "nope", "--from", "team:other")
    assert wrong.exit_code == 1 and "Only sx:quiet" in wrong.stderr
    answered = run("reply", mid, "answer!", "--from-thread", "quiet", "--json")
    assert answered.exit_code == 2  # no installed harness declares --from-thread: a usage error, not a guess
    ok = out_json(run("reply", mid, "answer!", "--from", "sx:quiet", "--json"))
    assert ok["status"] == "replied" and ok["target"]["address"] == "team:me"
    status = out_json(run("status", mid, "--from", "team:me", "--json"))
    assert status["status"] == "replied" and "body" not in status
    waited = out_json(run("wait", mid, "--from", "team:me", "--timeout-ms", "1000", "--json"))
    assert waited["outcome"] == "reply" and "answer!" in waited["reply"]["envelope"]
    declined = out_json(run("send", "sx:quiet", "another", "--anticipation", "action", "--from", "team:me", "--json"))
    assert run("reply", declined["messageId"], "--decline", "--from", "sx:quiet").exit_code == 2  # decline needs a reason
    assert run("reply", declined["messageId"], "x", "--decline", "--done", "--from", "sx:quiet").exit_code == 2
    declined_now = run("reply", declined["messageId"], "busy", "--decline", "--from", "sx:quiet")
    assert declined_now.exit_code == 0 and declined_now.stdout.startswith(f"decline: {declined['messageId']} (declined); reply ")
    done = out_json(run("send", "sx:quiet", "do it", "--anticipation", "action", "--from", "team:me", "--json"))
    quietly = run("reply", done["messageId"], "--done", "--from", "sx:quiet")
    assert quietly.stdout == f"done: {done['messageId']} (done); no reply message sent\n", quietly.stdout


@pytest.mark.anyio
async def test_a_retry_that_proves_absence_settles_unknown(harness: ScriptedHarness) -> None:
    app = App.create()
    try:
        me = Caller("team:me", "explicit")
        first = await send_reliably(app, "sx:lost", "x", sender=me)
        assert first.outcome == "unknown"

        async def queued(*args: Any) -> Any:
            from agent_link_core.harness import Delivery

            return Delivery()

        harness.deliver = queued  # type: ignore[method-assign]
        again = await send_reliably(app, "sx:lost", "x", sender=me, message_id=first.message_id, retry_unknown=True)
        assert again.outcome == "queued" and again.attempts == 1
    finally:
        await app.aclose()


def test_status_and_show_say_a_resolution_came_late(harness: ScriptedHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timedelta, timezone

    from agent_link_core import mailbox, store

    reply_by = (datetime.now(timezone.utc) + timedelta(seconds=40)).isoformat()
    mid = out_json(run("send", "sx:quiet", "by when?", "--reply-by", reply_by, "--from", "team:me", "--json"))["messageId"]
    on_time = run("status", mid, "--from", "team:me")
    assert ", status pending, " in on_time.stdout, on_time.stdout
    later = store.now_ms() + 60_000  # past replyBy: the message expired before its answer
    monkeypatch.setattr(mailbox, "now_ms", lambda: later)
    assert ", status expired, " in run("status", mid, "--from", "team:me").stdout
    assert run("reply", mid, "sorry, late", "--from", "sx:quiet").exit_code == 0
    assert out_json(run("status", mid, "--from", "team:me", "--json"))["resolution"]["late"] is True
    status = run("status", mid, "--from", "team:me")
    assert status.exit_code == 0 and ", status replied (late), from team:me to sx:quiet" in status.stdout, status.stdout
    assert "  status:  replied (late)\n" in run("show", mid, "--from", "team:me").stdout
