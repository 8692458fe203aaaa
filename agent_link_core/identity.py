"""Whether a sender the runtime named is a session its host has (``fromVerified``).

A harness names the caller from what the host runtime hands the process: an environment
variable the host sets in the shells it runs, a session id in an MCP request's ``_meta``, the
host's own session file. Anyone can set such a variable or ``_meta`` key, so a name alone is
not enough: a message is stored with ``verified: true`` (``fromVerified="true"`` in its
envelope) only when the named session also exists in that host, as the harness's
:meth:`~agent_link_core.harness.Harness.get_session` finds it. Otherwise the message is
stored as unverified (the caller's ``proven`` is False; its source is kept) and the send
says so with a ``sender_unverified`` warning.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

log = logging.getLogger(__name__)
# Sessions proved once per process: a session that existed keeps its address (archived
# sessions still exist), so a long-lived server asks its host once per sender.
_proved: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


async def prove_sender(app: App, caller: Caller) -> tuple[Caller, list[dict[str, Any]]]:
    """The caller to sign mail with, and the warnings to report.

    :param app: the running application (its harnesses answer ``get_session``).
    :param caller: who the runtime named (:meth:`App.caller`).
    :returns: ``(caller, [])`` when the caller is not runtime-named (nothing to prove) or
        its harness knows the session; else ``(caller with proven=False, [warning])``
        whose ``sender_unverified`` warning names the address and what named it. Never raises:
        a host that cannot be asked proves nothing.
    """
    if not caller.verified:
        return caller, []
    proved = _proved.setdefault(app, set())
    if caller.address in proved:
        return caller, []
    harness = app.harnesses.get(caller.host or "")
    session = None
    if harness is not None:
        ident = caller.address.split(":", 1)[1]
        try:  # a harness bug (SystemExit too, or a lookup that never ends) is reported and proves nothing
            session = await app._get_session(harness, ident)
        except AgentLinkError as exc:  # the host cannot be asked: nothing is proved
            log.info("could not prove %s: %s", caller.address, exc.code)
    if session is not None and session.address == caller.address:
        proved.add(caller.address)
        return caller, []
    warning = {
        "code": "sender_unverified",
        "message": f"{caller.address} was named by {caller.source} but {caller.host or 'no host'} has no such session, "
                   'so this message is marked fromVerified="false".',
        "details": {"address": caller.address, "namedBy": caller.source, "reason": "no_such_session"},
    }
    return dataclasses.replace(caller, proven=False), [warning]


async def prove_reader(app: App, address: str) -> None:
    """Refuse to read the mail of ``address`` for a process that is not it.

    The one read rule (:class:`~agent_link_core.mailbox.Visibility`) lets a reader see what
    it sent or received. A command that names the reader itself (``--as``, or ``--from`` on
    a read) could otherwise read anyone's mail, so naming an address is allowed only when
    the machine's user turned ``AGENT_LINK_INSPECT_ALL`` on, or when this process already is
    that address: the runtime names it (:meth:`App.caller`: the host's session variables or
    ``AGENT_LINK_ADDRESS``) and the proof sends use (:func:`prove_sender`) does not find the
    named session missing from its host.

    :param app: the running application.
    :param address: the address the command reads as (already checked to be well formed).
    :raises AgentLinkError: ``permission_denied`` with ``details.reason`` ``not_proven``
        (``details.address``, ``details.caller``).
    """
    if app.config.get("AGENT_LINK_INSPECT_ALL"):
        return
    me = app.caller()
    if me.known and me.address == address:
        _, warnings = await prove_sender(app, me)
        if not warnings:
            return
        why = f"it is named by {me.source}, but {me.host or 'no host'} has no such session"
    else:
        why = f"this process is {me.address}" if me.known else "this process has no address of its own"
    raise AgentLinkError(
        "permission_denied", f"Only {address} may read its mail here: {why}.",
        {"reason": "not_proven", "address": address, "caller": me.address},
        hint=f"Run the command inside {address}'s session (or in a process whose AGENT_LINK_ADDRESS is {address}), "
             "or have the machine's user set AGENT_LINK_INSPECT_ALL=1 to read every mailbox.",
    )
