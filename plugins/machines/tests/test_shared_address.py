"""One plain address served on two machines (README.md, "One address on two machines"): a
send from a machine that serves it keeps the message there; a send from a third machine goes
to the one machine where the address was active last, never to both; each such send says so
in one warning naming the machines. Three "machines" on a real NATS server."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from agent_link_machines.testkit import Machine, until

pytestmark = [pytest.mark.machines, pytest.mark.timeout(240)]


def stored_on(m: Machine, message_id: str) -> bool:
    conn = sqlite3.connect(m.state / "agent-link.db")
    try:
        return conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is not None
    finally:
        conn.close()


def activity_on(m: Machine, address: str) -> dict[str, int]:
    """``{machine: lastActivityMs}`` of ``address`` in the directory copy of ``m``."""
    try:
        directory = json.loads((m.state / "machines" / "directory.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {name: view.get("lastActivityMs") or 0 for name, entry in directory.get("machines", {}).items()
            for view in entry.get("sessions") or () if view.get("address") == address}


def send(m: Machine, to: str, body: str) -> dict[str, Any]:
    done = m.cli("send", to, body, "--json", address="team:sender")
    return dict(json.loads(done.stdout))


def shared_warning(sent: dict[str, Any]) -> dict[str, Any]:
    [warning] = [w for w in sent.get("warnings", []) if w["code"] == "machines_address_shared"]
    return dict(warning)


def test_an_address_on_two_machines_reaches_one_and_the_sender_is_told(machines: Callable[..., Machine]) -> None:
    alpha, beta, gamma = machines("alpha"), machines("beta"), machines("gamma")
    for m in (alpha, beta, gamma):
        m.start_relay()
    for m in (alpha, beta, gamma):
        m.wait_connected()
    beta.cli("inbox", address="team:dup")
    until(lambda: "beta" in activity_on(alpha, "team:dup"), 30, "alpha to list team:dup on beta")
    gamma.cli("inbox", address="team:dup")  # served later on gamma: active there last

    def gamma_last() -> bool:
        seen = activity_on(alpha, "team:dup")
        return "beta" in seen and "gamma" in seen and seen["gamma"] > seen["beta"]

    until(gamma_last, 30, "alpha to list team:dup on beta and gamma, gamma active last")
    first = send(alpha, "team:dup", "to the one active last")
    warning = shared_warning(first)
    assert warning["details"] == {"address": "team:dup", "machines": ["beta", "gamma"], "deliveredOn": "gamma"}, warning
    assert "served on several machines (beta, gamma)" in warning["message"] and "\n" not in warning["message"]
    until(lambda: stored_on(gamma, first["messageId"]), 30, "the message on gamma")
    status = json.loads(alpha.cli("machines", "status", "--json", check=False).stdout)
    assert {"address": "team:dup", "machines": ["beta", "gamma"]} in status["sharedAddresses"], status
    # the address active on beta again: the next send goes there, and each went to one machine only
    beta.cli("inbox", address="team:dup")

    def beta_last() -> bool:
        seen = activity_on(alpha, "team:dup")
        return seen.get("beta", 0) > seen.get("gamma", 0)

    until(beta_last, 30, "alpha to see team:dup active on beta last")
    second = send(alpha, "team:dup", "now to beta")
    assert shared_warning(second)["details"]["deliveredOn"] == "beta"
    until(lambda: stored_on(beta, second["messageId"]), 30, "the second message on beta")
    assert not stored_on(beta, first["messageId"]) and not stored_on(gamma, second["messageId"])
    # a send on a machine that serves the address itself stays there, and says so
    until(lambda: "gamma" in activity_on(beta, "team:dup"), 30, "beta to list team:dup on gamma")
    local = send(beta, "team:dup", "stays on beta")
    details = shared_warning(local)["details"]
    assert details == {"address": "team:dup", "machines": ["beta", "gamma"], "deliveredOn": "beta"}, details
    conn = sqlite3.connect(beta.state / "agent-link.db")
    try:
        assert conn.execute("SELECT COUNT(*) FROM machines_outbox WHERE record_id = ?", (local["messageId"],)).fetchone()[0] == 0
    finally:
        conn.close()
    assert stored_on(beta, local["messageId"]) and not stored_on(gamma, local["messageId"])
    # an address on one machine only: no warning
    gamma.cli("inbox", address="team:solo")
    until(lambda: "gamma" in activity_on(alpha, "team:solo"), 30, "alpha to list team:solo")
    assert "warnings" not in send(alpha, "team:solo", "plain")
