"""The one rule for ``fromVerified``: the host proved that the caller belongs to its session.

A harness names the caller from what the host runtime hands the process: an environment
variable the host sets in the processes it starts, a session id in an MCP request's ``_meta``,
the host's own session file, the kernel-reported peer of a socket. Any process of the machine's
user can set such a variable, send such ``_meta``, write such a file or connect to such a
socket, so a name is never proof. A message is stored with ``verified: true``
(``fromVerified="true"`` in its envelope) only when both hold:

* **the host proved it**: the harness checked the host's own records and put what it found in
  :attr:`~agent_link_core.model.Caller.evidence`. What counts is the harness's to say, and
  always ties the calling process to the session: the calling process is, or descends from,
  the host's own program, which that host's records name as running that session (for example
  a host process whose own session record names it, start time checked, or one that holds the
  session's transcript open; each host plugin's harness says which). Harnesses find those processes with
  the host plugins' shared helper (plugins/hostkit/README.md);
* **the session exists** in that host (:meth:`~agent_link_core.harness.Harness.get_session`).

Otherwise the message is stored unverified (``Caller.proven`` False; its source is kept) and
the send says why with a ``sender_unverified`` warning (``details.reason``: ``not_proven``
or ``no_such_session``). An address given on the command line (``--from``, a harness's sender
options) or by ``AGENT_LINK_ADDRESS`` is never verified.

What this does not prove: which of several sessions one host process runs (a host process that
runs many sessions lets a command started in one of them name another of the same process), nor anything against a process of the same user that controls the host process
itself (a debugger, or running the host program to make it write its own records).
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.lazy_log import LazyLogger
from agent_link_core.model import RUNTIME_SOURCES, Caller, address_scheme, is_address

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import weakref
    from typing import Any

    from agent_link_core.app import App

log = LazyLogger(__name__)
# Sessions found once per process: a session that existed keeps its address (archived
# sessions still exist), so a long-lived server asks its host once per sender. Made on first
# use: a command that proves no session never loads weakref.
_existing: weakref.WeakKeyDictionary[Any, set[str]] | None = None


def named_sender(app: App, *, explicit: str | None = None, named: Mapping[str, str] | None = None) -> Caller:
    """Who sends from the command line: an explicit ``--from`` address, else a sender named in
    a harness's own terms (its :class:`~agent_link_core.harness.SenderOption` values,
    ``{key: value}``) for the harnesses to recognise, else :meth:`App.caller
    <agent_link_core.app.App.caller>` (the current session, ``AGENT_LINK_ADDRESS``, or
    unverified ``external``). A session named only by the environment is proved when it signs
    something (:func:`prove_sender`).

    :raises AgentLinkError: ``invalid_arguments`` for a malformed ``explicit`` address, or a
        named sender no harness recognises (the path names the option).
    """
    if explicit:
        if not is_address(explicit):
            raise invalid_arguments([{"path": "from", "rule": "pattern", "expected": "an address such as <harness>:<id>"}])
        return Caller(explicit, "explicit", address_scheme(explicit))
    if named:
        for harness in app.harnesses.values():
            found = harness.identify_caller(dict(named), {})
            if found is not None and found.known:
                return Caller(found.address, "explicit", found.host)
        flags = [o.flag for h in app.harnesses.declared().values() for o in h.sender_options if o.key in named] or sorted(named)
        raise invalid_arguments([{"path": flags[0].lstrip("-"), "rule": "unknown",
                                  "expected": "a sender an installed harness recognises"}])
    return app.caller()


async def _session_exists(app: App, caller: Caller) -> bool:
    """True when the caller's harness finds its session; False when it does not or cannot
    be asked (nothing is proved then)."""
    global _existing
    if _existing is None:
        import weakref

        _existing = weakref.WeakKeyDictionary()
    known = _existing.setdefault(app, set())
    if caller.address in known:
        return True
    harness = app.harnesses.get(caller.host or "")
    session = None
    if harness is not None:
        ident = caller.address.split(":", 1)[1]
        try:  # a harness bug (SystemExit too, or a lookup that never ends) is reported and proves nothing
            session = await app._get_session(harness, ident)
        except AgentLinkError as exc:  # the host cannot be asked: nothing is proved
            log.info("could not look up %s: %s", caller.address, exc.code)
    if session is not None and session.address == caller.address:
        known.add(caller.address)
        return True
    return False


async def prove_sender(app: App, caller: Caller) -> tuple[Caller, list[dict[str, Any]]]:
    """The caller to sign mail with, and the warnings to report (the module's rule).

    :param app: the running application (its harnesses answer ``get_session``).
    :param caller: who the runtime named (:meth:`App.caller`), with the harness's
        ``evidence`` when the host proved it.
    :returns: ``(caller, [])`` when the caller is not runtime-named (nothing to prove: it
        signs unverified); ``(caller with proven=True, [])`` when the host proved it and the
        session exists; else ``(caller with proven=False, [warning])`` whose
        ``sender_unverified`` warning names the address, what named it and why
        (``details.reason``: ``no_such_session`` or ``not_proven``). Never raises: a host that
        cannot be asked proves nothing.
    """
    if caller.source not in RUNTIME_SOURCES or not caller.known:
        return caller.replace(proven=False), []
    host = caller.host or "no host"
    if not await _session_exists(app, caller):
        reason, why = "no_such_session", f"{host} has no such session"
    elif not caller.evidence:
        reason, why = "not_proven", f"{host} did not prove that this process belongs to that session (a name alone proves nothing)"
    else:
        return caller.replace(proven=True), []
    warning = {
        "code": "sender_unverified",
        "message": f'{caller.address} was named by {caller.source} but {why}, so this message is marked fromVerified="false".',
        "details": {"address": caller.address, "namedBy": caller.source, "reason": reason},
    }
    return caller.replace(proven=False), [warning]


def reader_proved_here(app: App, address: str) -> bool:
    """True when :func:`prove_reader` lets this process read as ``address`` without asking a
    host (``AGENT_LINK_INSPECT_ALL``, or ``AGENT_LINK_ADDRESS`` names it): a command then
    needs no event loop for the check. False means: await :func:`prove_reader`."""
    if app.config.get("AGENT_LINK_INSPECT_ALL"):
        return True
    me = app.caller()
    return me.known and me.address == address and me.source == "config"


def reads_own_mail(app: App, address: str) -> bool:
    """True when the runtime names this process ``address`` (``AGENT_LINK_ADDRESS`` or its
    host's session): reading there uses up the mail shown, as the agent's own read does.
    False when only ``AGENT_LINK_INSPECT_ALL`` lets the process read there: a person looking
    into another agent's mailbox, whose reads leave the mail unread for that agent unless
    asked (``inbox --mark-read``)."""
    me = app.caller()
    return me.known and me.address == address


async def prove_reader(app: App, address: str) -> None:
    """Refuse to read the mail of ``address`` for a process that is not proved to be it.

    The one read rule (:class:`~agent_link_core.mailbox.Visibility`) lets a reader see what
    it sent or received, so who the reader is must hold up as well as a signature does. A
    process reads as ``address`` (its own session's by default, ``--as``, or ``--from`` on a
    read) only when one of these holds:

    * the machine's user turned ``AGENT_LINK_INSPECT_ALL`` on;
    * the runtime names this process ``address`` (:meth:`App.caller`) through
      ``AGENT_LINK_ADDRESS``: a plain address is the user's own choice, not a host's session;
    * the runtime names this process ``address`` as a host's session and the host proved it,
      the same proof that signs ``fromVerified="true"`` (:func:`prove_sender`). A session
      variable set by hand to another session's id names that session but proves nothing.

    :param app: the running application.
    :param address: the address the command reads as (already checked to be well formed).
    :raises AgentLinkError: ``permission_denied`` with ``details.reason`` ``not_proven``
        (``details.address``, ``details.caller``; ``details.namedBy`` when a host's session
        was named but not proved).
    """
    if app.config.get("AGENT_LINK_INSPECT_ALL"):
        return
    me = app.caller()
    details: dict[str, Any] = {"reason": "not_proven", "address": address, "caller": me.address}
    if me.known and me.address == address:
        if me.source == "config":
            return
        if me.source in RUNTIME_SOURCES:
            proved, warnings = await prove_sender(app, me)
            if proved.verified:
                return
            host = me.host or "no host"
            cause = warnings[0]["details"]["reason"] if warnings else "not_proven"
            why = (f"it is named by {me.source}, but {host} has no such session" if cause == "no_such_session" else
                   f"it is named by {me.source}, but {host} did not prove that this process belongs to that session")
            details["namedBy"] = me.source
        else:
            why = f"it is named by {me.source}, which proves nothing"
    else:
        why = f"this process is {me.address}" if me.known else "this process has no address of its own"
    raise AgentLinkError(
        "permission_denied", f"Only {address} may read its mail here: {why}.", details,
        hint=f"Run the command inside {address}'s session (or in a process whose AGENT_LINK_ADDRESS is {address}), "
             "or have the machine's user set AGENT_LINK_INSPECT_ALL=1 to read every mailbox.",
    )
