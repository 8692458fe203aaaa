"""Delivered means the model saw it (core, with a scripted harness):

* a push the host accepted but has not shown yet is ``accepted``: never pushed again, status
  says so (MCP tool, CLI), and it becomes delivered on the harness's late evidence;
* reads and pushes fitted to what the host shows: the budgets plugin's
  (plugins/budgets/tests/test_budget_guarantees.py).

The real-host versions live with the codex and claude plugins' tests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.commands.send import send_reliably
from agent_link_core.sending import message_summary
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness
from agent_link_core.model import Caller, Session
from agent_link_testing.cli_plugins import add_cli_plugins
from agent_link_testing.cli_runner import invoke as run
from agent_link_testing.harnesses import HarnessPlugin

ME = Caller("team:me", "explicit", "team")


class Host(Harness):
    """Sessions ``hx:<id>``: ``steer`` accepts pushes and shows them once ``shown`` has them,
    ``ok`` shows them at once, anything else keeps them queued."""

    name = "hx"

    def __init__(self) -> None:
        self.pushed: list[tuple[str, str]] = []
        self.shown: set[str] = set()

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"hx:{session_id}", "hx", session_id)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        self.pushed.append((message["id"], envelope))
        target = message["recipient"].split(":", 1)[1]
        if target == "ok":
            return Delivery(delivered=True, via="hx-push", evidence={"echo": message["id"]})
        if target == "steer":
            return Delivery(accepted=True, note="accepted, awaiting the hx session")
        return Delivery()

    async def recheck(self, message: dict[str, Any]) -> Delivery | None:
        if message["id"] in self.shown:
            return Delivery(delivered=True, via="hx-push", evidence={"echo": message["id"], "late": True})
        return None


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Host:
    harness = Host()
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts")
    add_cli_plugins(monkeypatch, HarnessPlugin(harness))
    return harness


@pytest.fixture
def app(host: Host):
    application = App.create()
    yield application
    application.close()


@pytest.mark.anyio
async def test_an_accepted_push_is_never_pushed_again_and_is_delivered_on_late_evidence(app: App, host: Host) -> None:
    sent = await app.send(caller=ME, to="hx:steer", body="please look", anticipation="reply")
    mid = sent.message["id"]
    summary = message_summary(app, sent)
    assert (summary["delivery"], summary["deliveryNote"]) == ("accepted", "accepted, awaiting the hx session")
    assert app.mailbox.push_outcome(mid) == "accepted"
    status = app.status(ME, mid)
    assert (status["delivery"], status["deliveryNote"], status["deliveredAt"]) == ("accepted", "accepted, awaiting the hx session", None)
    # the same id again pushes nothing; nor does a resend asking to retry unknown outcomes
    again = await send_reliably(app, "hx:steer", "please look", sender=ME, message_id=mid, anticipation="reply",
                                    retry_unknown=True)
    assert again.outcome == "accepted" and again.attempts == 0 and [m for m, _ in host.pushed] == [mid]
    assert await app.refresh_delivery(mid) is False  # no evidence yet: still accepted
    assert app.status(ME, mid)["delivery"] == "accepted"
    host.shown.add(mid)
    assert await app.refresh_delivery(mid) is True
    row = app.mailbox.get_row(mid)
    assert row["delivered_via"] == "hx-push" and app.status(ME, mid)["delivery"] == "delivered"
    assert "deliveryNote" not in app.status(ME, mid)
    assert await app.refresh_delivery(mid) is False  # delivered once


@pytest.mark.anyio
@pytest.mark.parametrize("fault", [RuntimeError("host gone"), SystemExit(3), "not a Delivery",
                                   AgentLinkError("not_found", "the host cannot find it")])
async def test_a_recheck_that_fails_proves_nothing_and_a_fault_is_its_plugins(
        app: App, host: Host, monkeypatch: pytest.MonkeyPatch, fault: Any) -> None:
    sent = await app.send(caller=ME, to="hx:steer", body="please look", anticipation="reply")
    mid = sent.message["id"]

    async def recheck(message: dict[str, Any]) -> Any:
        if isinstance(fault, BaseException):
            raise fault
        return fault

    monkeypatch.setattr(host, "recheck", recheck)
    assert await app.refresh_delivery(mid) is False  # SystemExit too: contained, the call goes on
    assert app.mailbox.push_outcome(mid) == "accepted"
    problems = [p for p in app.hooks.boundary.report() if p.get("hook") == "harness.hx.recheck"]
    # a deliberate refusal (AgentLinkError) is no fault of the plugin; anything else is
    assert len(problems) == (0 if isinstance(fault, AgentLinkError) else 1), app.hooks.boundary.report()


def test_the_cli_reports_accepted_and_its_status_finds_late_evidence(host: Host) -> None:
    sent = run("send", "hx:steer", "from the cli", "--from", "team:me", "--json")
    assert sent.exit_code == 0, sent.output
    mid = json.loads(sent.stdout)["messageId"]
    assert json.loads(sent.stdout)["outcome"] == "accepted"
    shown = run("status", mid, "--from", "team:me")
    assert shown.exit_code == 0 and "accepted, awaiting the hx session" in shown.stdout
    host.shown.add(mid)
    status = json.loads(run("status", mid, "--from", "team:me", "--json").stdout)
    assert status["delivery"] == "delivered"
