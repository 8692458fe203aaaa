"""Harnesses for tests that need sessions without a host: :class:`ScriptedHarness` (sessions
and push outcomes chosen by their ids) and :class:`HarnessPlugin`, the plugin object that
registers harnesses (what a test passes as an extra plugin, ``add_cli_plugins`` or
``App.create(extra_plugins=...)``)."""

from __future__ import annotations

from typing import Any

from agent_link_core import hookimpl
from agent_link_core.harness import Delivery, Harness, SessionListing
from agent_link_core.model import Session


class HarnessPlugin:
    """Registers each of ``harnesses`` (:class:`~agent_link_core.harness.Harness` objects, in
    order) through ``agent_link_register_harnesses``."""

    def __init__(self, *harnesses: Harness) -> None:
        self.harnesses = harnesses

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        for harness in self.harnesses:
            register(harness)


class ScriptedHarness(Harness):
    """Sessions ``<name>:<id>`` titled ``<id> title`` in ``/home/u/proj-<id>``, the n-th active at
    ``n`` ms. A push to ``ok`` is delivered; to ``busy`` retryable twice, then delivered; to
    ``lost`` unknown; to any other id not delivered.

    :param name: the harness name (the address scheme).
    :param ids: the session ids, in listing order.
    :param complete: whether listings say they are complete.
    """

    def __init__(self, name: str, ids: tuple[str, ...], complete: bool = True) -> None:
        self.name = name
        self.ids = ids
        self.complete = complete
        self.pushes: list[str] = []
        self.expiries: list[Any] = []  # the message's expiresAt when it was pushed (what an envelope can say)
        self.busy_left = 2

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        sessions = [Session(f"{self.name}:{i}", self.name, i, title=f"{i} title", cwd=f"/home/u/proj-{i}", last_activity_ms=n)
                    for n, i in enumerate(self.ids)]
        return SessionListing(sessions, {"available": True, "reason": None}, complete=self.complete)

    async def get_session(self, session_id: str) -> Session | None:
        return next((s for s in (await self.list_sessions()).sessions if s.id == session_id), None)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        target = message["recipient"].split(":", 1)[1]
        self.pushes.append(message["id"])
        self.expiries.append((message.get("metadata") or {}).get("expiresAt"))
        if target == "ok":
            return Delivery(delivered=True, via="scripted", evidence={"echo": message["id"]})
        if target == "busy":
            if self.busy_left > 0:
                self.busy_left -= 1
                return Delivery(retryable=True, warnings=[{"code": "busy", "message": "overloaded"}])
            return Delivery(delivered=True, via="scripted")
        if target == "lost":
            return Delivery(unknown=True)
        return Delivery()
