"""Reminders: the core decides what is due (docs/behaviour.md §8); a harness plugin shows them through its prompt hook or
a push (``agent_link_push_reminders``, offered by :func:`sweep`), each number claimed once across all processes. Standard
modules only: the hook fast path imports it.
"""

from __future__ import annotations

from agent_link_core.envelope import reminder_notice
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.mailbox import Mailbox

#: how often a running MCP server offers due reminders to harnesses that push them, in ms
SWEEP_INTERVAL_MS = 15_000


class ClaimedReminders:
    """Reminder numbers this process won and must now show to ``address`` (``<harness>:<id>``): ``items`` ``[(message id,
    reminder number n ≥ 1, sender address)]`` oldest first, each ``n`` of ``limit`` (the configured reminder limit)."""

    __slots__ = ("address", "items", "limit")

    def __init__(self, address: str, items: list[tuple[str, int, str]], limit: int) -> None:
        self.address, self.items, self.limit = address, items, limit

    def text(self) -> str:
        """The core's reminder wording (never a message body) that a harness shows: the distinct senders, the highest reminder number."""
        senders = list(dict.fromkeys(sender for _, _, sender in self.items))
        return reminder_notice(len(self.items), senders, max(n for _, n, _ in self.items), self.limit)


class DueReminders:
    """The reminders due now for the session ``address`` (``<harness>:<id>``), read from ``mailbox``: ``due`` ``[(message row,
    MessageState)]`` from ``Mailbox.due_reminders``; nothing is claimed until :meth:`claim`."""

    __slots__ = ("address", "due", "mailbox")

    def __init__(self, mailbox: Mailbox, address: str, due: list[tuple[Any, Any]]) -> None:
        self.mailbox, self.address, self.due = mailbox, address, due

    @property
    def harness(self) -> str:
        """The address scheme, i.e. the name of the harness that owns the session."""
        return self.address.split(":", 1)[0]

    @property
    def session_id(self) -> str:
        """The session id within its harness (the address without its scheme)."""
        return self.address.split(":", 1)[1]

    def claim(self, via: str, *, wait: bool = True) -> ClaimedReminders | None:
        """Claim the next reminder number of each due message: the numbers won, or None (show nothing) when another process won
        them all. ``via``: how it is shown (``<harness>-prompt-hook`` ...), recorded with the ``reminded`` event; ``wait`` False (a
        prompt hook): claiming stops while another process holds the write lock, and the rest stay due."""
        items = []
        for row, state in self.due:
            n = state.reminder_count + 1
            try:
                won = self.mailbox.record_reminder(row["id"], n, via, self.address, wait=wait)
            except AgentLinkError as exc:
                if wait or exc.code != "state_busy":
                    raise
                break
            if won:
                items.append((row["id"], n, row["from_addr"]))
        if not items:
            return None
        return ClaimedReminders(self.address, items, self.mailbox.config.reminder_limit)


def due_for(mailbox: Mailbox, address: str, now: int | None = None) -> DueReminders | None:
    """The reminders due for ``address`` now, or None when none is due (nothing claimed)."""
    due = mailbox.due_reminders(address, now)
    return DueReminders(mailbox, address, due) if due else None


async def sweep(app: Any) -> int:
    """Offer every session of a loaded harness of ``app`` its due reminders, through the plugins that push reminders; one that
    raises is logged (what it claimed stays claimed). Returns how many sessions a plugin reported as reminded."""
    reminded = 0
    for address in app.mailbox.reminder_recipients():
        if address.split(":", 1)[0] not in app.harnesses:
            continue
        due = due_for(app.mailbox, address)
        if due is None:
            continue
        try:
            if await app.hooks.acall("agent_link_push_reminders", due=due):
                reminded += 1
        except Exception:
            import logging  # not at module level: the hook fast path imports this module

            logging.getLogger(__name__).exception("pushing reminders to %s failed", address)
    return reminded
