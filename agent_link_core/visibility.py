"""The one visibility rule of every read path (re-exported by :mod:`agent_link_core.mailbox`)."""

from __future__ import annotations

from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False  # no typing at run time: the hook fast path imports this (via the mailbox)
if TYPE_CHECKING:
    from typing import Any


class Visibility:
    """Which stored messages one reader may see: those it sent (``from_addr``) or that were
    addressed or handed to it (``to_addr``, ``recipient``); all of them with ``everything``
    (only when ``AGENT_LINK_INSPECT_ALL`` is on). Build one with :meth:`Mailbox.visible_to`;
    :meth:`sql` (in queries) and :meth:`allows` (on rows read) apply the same rule.

    :param address: the reader's address (None: an unidentified reader, who sees nothing).
    :param everything: True when the reader may see every message.
    :param reason: why: ``participant``, ``inspect_all`` or ``person``.
    """

    __slots__ = ("address", "everything", "reason")

    def __init__(self, address: str | None, everything: bool = False, reason: str = "participant") -> None:
        self.address, self.everything, self.reason = address, everything, reason

    @classmethod
    def everything_for(cls, address: str | None, reason: str) -> Visibility:
        """All mail, for a reader allowed to see it (``reason`` says why, e.g. ``person``)."""
        return cls(address, True, reason)

    def sql(self, table: str = "messages") -> tuple[str, list[Any]]:
        """A WHERE fragment and its parameters for rows of ``messages`` named ``table``.

        :returns: e.g. ``("(m.from_addr = ? OR m.to_addr = ? OR m.recipient = ?)", [a, a, a])``;
            ``("1", [])`` for everything, ``("0", [])`` for an unidentified reader.
        """
        if self.everything:
            return "1", []
        if not self.address:
            return "0", []
        return f"({table}.from_addr = ? OR {table}.to_addr = ? OR {table}.recipient = ?)", [self.address] * 3

    def allows(self, row: Any) -> bool:
        """True when this reader may see the message ``row`` (a row or dict of ``messages``)."""
        if self.everything:
            return True
        return bool(self.address) and self.address in (row["from_addr"], row["to_addr"], row["recipient"])

    def ids_sql(self, table: str = "m") -> tuple[str, list[Any]]:
        """A subquery of the ids of the messages this reader sees, and its parameters
        (``message_id IN (<subquery>)``)."""
        where, params = self.sql(table)
        return f"SELECT {table}.id FROM messages {table} WHERE {where}", params

    def require(self, row: Any, what: str = "this message") -> None:
        """Refuse unless :meth:`allows` ``row``.

        :param what: how the refusal names what was asked for (``the status of <id>``).
        :raises AgentLinkError: ``permission_denied`` (reason ``not_participant``).
        """
        if not self.allows(row):
            raise AgentLinkError(
                "permission_denied", f"Only the sender or the recipient may read {what}.", {"reason": "not_participant"},
                hint=f"You are {self.address or 'unidentified'}; ask as the sender or the recipient.",
            )
