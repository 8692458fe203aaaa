"""The one rule for ``fromVerified`` (README.md, "Trust"): the harness proved the caller belongs to its session
(:attr:`~agent_link_core.model.Caller.evidence`; a name alone never is) and the session exists in that host.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.lazy import LazyLogger
from agent_link_core.model import RUNTIME_SOURCES, Caller, address_scheme, is_address

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import weakref
    from typing import Any

    from agent_link_core.app import App

log = LazyLogger(__name__)
# sessions found, per App: a session that existed keeps its address (archived ones still exist), so a long-lived server
# asks its host once per sender (weakref imported on first use)
_existing: weakref.WeakKeyDictionary[Any, set[str]] | None = None


def named_sender(app: App, *, explicit: str | None = None, named: Mapping[str, str] | None = None) -> Caller:
    """Who sends from the command line: an explicit ``--from`` address, else a sender named by a harness's
    :class:`~agent_link_core.harness.SenderOption` values (``{key: value}``), else :meth:`App.caller <agent_link_core.app.App.caller>`.

    :raises AgentLinkError: ``invalid_arguments`` for a malformed ``explicit`` address, or a named sender no harness
        recognises (the path names the option).
    """
    if explicit:
        if not is_address(explicit) or explicit.startswith("role:"):  # a role is where mail goes, never who sends it
            raise invalid_arguments([{"path": "from", "rule": "pattern", "expected": "an address such as <harness>:<id>, not a role"}])
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
    """True when the caller's harness finds its session (False when it cannot be asked)."""
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
        try:  # a harness's fault is reported there and proves nothing
            session = await app._get_session(harness, caller.address.split(":", 1)[1])
        except AgentLinkError as exc:
            log.info("could not look up %s: %s", caller.address, exc.code)
    if session is not None and session.address == caller.address:
        known.add(caller.address)
        return True
    return False


async def prove_sender(app: App, caller: Caller) -> tuple[Caller, list[dict[str, Any]]]:
    """The caller to sign mail with, and the warnings to report (the module's rule).

    :param app: the running application (its harnesses answer ``get_session``).
    :param caller: who the runtime named (:meth:`App.caller`), with the harness's ``evidence`` when the host proved it.
    :returns: ``(caller, [])`` when the caller is not runtime-named (nothing to prove: it signs unverified); ``(caller
        with proven=True, [])`` when the host proved it and the session exists; else ``(caller with proven=False,
        [warning])`` whose ``sender_unverified`` warning names the address, what named it and why (``details.reason``:
        ``no_such_session`` or ``not_proven``). Never raises: a host that cannot be asked proves nothing.
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
    """True when :func:`prove_reader` passes without asking a host (``AGENT_LINK_INSPECT_ALL``, or ``AGENT_LINK_ADDRESS``
    names ``address``); False: await :func:`prove_reader`."""
    if app.config.get("AGENT_LINK_INSPECT_ALL"):
        return True
    me = app.caller()
    return me.known and me.address == address and me.source == "config"


def reads_own_mail(app: App, address: str) -> bool:
    """True when the runtime names this process ``address``: its reads use up the mail shown. False for a person reading
    another agent's mailbox (``AGENT_LINK_INSPECT_ALL``), whose reads leave the mail unread unless asked (``inbox --mark-read``)."""
    me = app.caller()
    return me.known and me.address == address


async def prove_reader(app: App, address: str) -> None:
    """Refuse to read the mail of ``address`` for a process not proved to be it (docs/storage.md, "Who sees what"): allowed
    with ``AGENT_LINK_INSPECT_ALL``, when ``AGENT_LINK_ADDRESS`` names it, or when :func:`prove_sender` proves the runtime's.

    :param app: the running application.
    :param address: the address the command reads as (already checked to be well formed).
    :raises AgentLinkError: ``permission_denied`` with ``details.reason`` ``not_proven`` (``details.address``,
        ``details.caller``; ``details.namedBy`` when a host's session was named but not proved).
    """
    if reader_proved_here(app, address):
        return
    me = app.caller()
    details: dict[str, Any] = {"reason": "not_proven", "address": address, "caller": me.address}
    if me.known and me.address == address and me.source in RUNTIME_SOURCES:
        proved, warnings = await prove_sender(app, me)
        if proved.verified:
            return
        no_session = bool(warnings) and warnings[0]["details"]["reason"] == "no_such_session"
        why = f"it is named by {me.source}, but {me.host or 'no host'} " + (
            "has no such session" if no_session else "did not prove that this process belongs to that session")
        details["namedBy"] = me.source
    elif me.known and me.address == address:
        why = f"it is named by {me.source}, which proves nothing"
    else:
        why = f"this process is {me.address}" if me.known else "this process has no address of its own"
    raise AgentLinkError(
        "permission_denied", f"Only {address} may read its mail here: {why}.", details,
        hint=f"Run the command inside {address}'s session (or in a process whose AGENT_LINK_ADDRESS is {address}), "
             "or have the machine's user set AGENT_LINK_INSPECT_ALL=1 to read every mailbox.",
    )
