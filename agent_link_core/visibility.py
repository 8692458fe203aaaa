"""Who may read which mail: the one rule every read path applies.

A caller sees a message it sent or received (it is the sender, the current recipient, or the
address the message was sent to), and nothing else; with the ``AGENT_LINK_INSPECT_ALL``
setting (the person running the server opted in) it sees every message. Status, waits,
inspect, receipts, search, conversations and the web page all ask this module, so no path can
show a body, snippet, decline reason or note of someone else's mail.

An unidentified caller is the address ``external``: it sees mail sent or received as
``external`` (e.g. a CLI send with no identity), as status and wait always allowed.

Usage::

    view = visible_to(app.config, caller)
    if not view.sees(row): ...                      # one message
    clause, params = view.where()                   # SQL over the ``messages`` table
    rows = conn.execute(f"SELECT * FROM messages WHERE {clause}", params)

Only light modules are imported (the hook fast path may use it).
"""

from __future__ import annotations

from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping
    from typing import Any, TypeAlias

    Message: TypeAlias = "Mapping[str, Any] | sqlite3.Row"

    from agent_link_core.config import Config
    from agent_link_core.model import Caller

INSPECT_ALL_SETTING = "AGENT_LINK_INSPECT_ALL"
# The columns of ``messages`` that make a caller a participant.
PARTICIPANT_COLUMNS = ("from_addr", "recipient", "to_addr")


class Visibility:
    """What one caller may read.

    :param address: the caller's address (``external`` when unidentified).
    :param everything: True when the inspect-all setting lets this caller read all mail.
    """

    __slots__ = ("address", "everything")

    def __init__(self, address: str, everything: bool = False) -> None:
        self.address = address
        self.everything = everything

    def __repr__(self) -> str:
        return f"Visibility({self.address!r}, everything={self.everything!r})"

    def sees(self, message: Message) -> bool:
        """True when the caller may read ``message`` (a ``messages`` row or a dict with the
        columns ``from_addr``, ``recipient``, ``to_addr``)."""
        if self.everything:
            return True
        return any(_get(message, column) == self.address for column in PARTICIPANT_COLUMNS)

    def where(self, table: str = "") -> tuple[str, list[Any]]:
        """An SQL condition over the ``messages`` table (``table``: an alias, or ``""``)
        selecting exactly the messages the caller sees, and its parameters."""
        if self.everything:
            return "1 = 1", []
        prefix = f"{table}." if table else ""
        clause = "(" + " OR ".join(f"{prefix}{c} = ?" for c in PARTICIPANT_COLUMNS) + ")"
        return clause, [self.address] * len(PARTICIPANT_COLUMNS)

    def require(self, message: Message, what: str = "this message") -> None:
        """Refuse unless the caller sees ``message``.

        :param what: how the refusal names the thing asked for (``the status of <id>``).
        :raises AgentLinkError: ``permission_denied`` (reason ``not_participant``).
        """
        if not self.sees(message):
            raise AgentLinkError(
                "permission_denied",
                f"Only the sender or the recipient may read {what}.",
                {"reason": "not_participant"},
                hint=f"You are {self.address}; ask as the sender or the recipient.",
            )


def visible_to(config: Config, caller: Caller, *, scope: str = "caller") -> Visibility:
    """The :class:`Visibility` of ``caller`` under this process's settings.

    :param scope: ``caller`` (what the caller sent or received, even with inspect-all on) or
        ``all`` (every message; needs ``AGENT_LINK_INSPECT_ALL``).
    :raises AgentLinkError: ``permission_denied`` (reason ``inspect_all_disabled``) for
        scope ``all`` without the setting.
    """
    if scope == "all":
        if not config.get(INSPECT_ALL_SETTING):
            raise AgentLinkError(
                "permission_denied",
                f"Reading every mailbox needs {INSPECT_ALL_SETTING}=1 in the server's environment.",
                {"reason": "inspect_all_disabled"},
                hint="Ask for your own mail (scope caller), or have the person running agent-link set the variable.",
            )
        return Visibility(caller.address, everything=True)
    return Visibility(caller.address)


def _get(message: Message, column: str) -> Any:
    try:
        return message[column]
    except (KeyError, IndexError):
        return None
