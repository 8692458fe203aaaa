"""The typed Python API: the same operations as the ``agent-link`` CLI, for scripts.

Every function takes an :class:`~agent_link_core.app.App` (``App.create()`` builds one from
the environment) and raises :class:`~agent_link_core.errors.AgentLinkError` on failure::

    import asyncio
    from agent_link_core.app import App
    from agent_link_core import api

    app = App.create()
    me = api.sender(app, explicit="team:alice")
    result = asyncio.run(api.send_reliably(app, "team:bob", "Build is green.", sender=me))
    print(result.outcome, result.message_id)      # queued 01J...

A send has exactly one outcome: ``delivered`` (the recipient's host confirmed it),
``accepted`` (the host took it and will show it, e.g. after a running tool call; it is never
pushed again and becomes delivered on evidence), ``queued`` (stored; the recipient gets it from its inbox or a later push), ``rejected``
(refused, nothing delivered) or ``unknown`` (a push may have landed but its answer was
lost; it is never pushed again unless asked with ``retry_unknown``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_link_core.app import App
from agent_link_core.directory import session_view
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import iso
from agent_link_core.model import Caller, address_scheme, is_address, is_ulid
from agent_link_core.store import now_ms

ALIAS_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
OUTCOMES = ("delivered", "accepted", "queued", "rejected", "unknown")
SESSIONS_FORMAT_VERSION = 1


@dataclass(frozen=True)
class RetryPolicy:
    """Automatic retries of a push that failed before the host accepted anything.

    :param count: extra attempts (0 = none).
    :param delay_ms: wait before the first retry, in ms.
    :param backoff: multiplier applied to the delay after each retry (>= 1).
    :param jitter: random fraction (0-1) added to or taken from each delay.
    """

    count: int = 0
    delay_ms: int = 500
    backoff: float = 2.0
    jitter: float = 0.1

    def delays_ms(self) -> list[float]:
        """The delays before each retry, jitter applied."""
        import random  # here: a send without retries never needs it

        out = []
        for k in range(self.count):
            base = self.delay_ms * (self.backoff**k)
            out.append(max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter))))
        return out


@dataclass
class SendResult:
    """The outcome of :func:`send_reliably`.

    :param outcome: one of :data:`OUTCOMES`.
    :param message_id: the message's ULID (None when rejected before storing).
    :param to: the recipient address.
    :param duplicate: True when the same id and content was sent before (nothing resent).
    :param attempts: push attempts made by this call.
    :param error: the refusal, for ``rejected``.
    """

    outcome: str
    message_id: str | None
    to: str | None
    duplicate: bool = False
    attempts: int = 0
    expires_at: str | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the CLI prints (``version`` 1)."""
        out = {"version": 1, "outcome": self.outcome, "messageId": self.message_id, "to": self.to,
               "duplicate": self.duplicate, "attempts": self.attempts, "expiresAt": self.expires_at}
        if self.warnings:
            out["warnings"] = self.warnings
        if self.error:
            out["error"] = self.error
        out.update(self.fields)
        return out


# The ``named`` keys that ``sender(thread=, endpoint=)`` stand for: kept only so that callers
# written before harnesses declared their sender options keep working.
LEGACY_NAMED_KEYS = ("threadId", "endpointId")


def sender(app: App, *, explicit: str | None = None, named: Mapping[str, str] | None = None,
           thread: str | None = None, endpoint: str | None = None) -> Caller:
    """Who is sending: an explicit ``--from`` address, else a sender named in a harness's own
    terms (its :class:`~agent_link_core.harness.SenderOption` values, ``{key: value}``) for
    the harnesses to recognise, else the current session (from the session variables the
    harness plugins read), else ``AGENT_LINK_ADDRESS``, else unverified ``external``.

    A session named only by the environment is proved when it signs something, by the same
    check an MCP call gets (:func:`agent_link_core.identity.prove_sender`): one its host does
    not have signs ``fromVerified="false"`` and the send carries a ``sender_unverified``
    warning.

    ``thread`` / ``endpoint`` are the older spelling of ``named`` for the harness that
    declares those keys; kept for existing callers.

    :raises AgentLinkError: ``invalid_arguments`` for a malformed ``explicit`` address, or a
        named sender no harness recognises (the path names the option).
    """
    if explicit:
        if not is_address(explicit):
            raise invalid_arguments([{"path": "from", "rule": "pattern", "expected": "an address such as <harness>:<id>"}])
        return Caller(explicit, "explicit", address_scheme(explicit))
    if thread:
        named = {LEGACY_NAMED_KEYS[0]: thread, **({LEGACY_NAMED_KEYS[1]: endpoint} if endpoint else {})}
    if named:
        for harness in app.harnesses.values():
            found = harness.identify_caller(dict(named), {})
            if found is not None and found.known:
                return Caller(found.address, "explicit", found.host)
        flags = [o.flag for h in app.harnesses.declared().values() for o in h.sender_options if o.key in named] or sorted(named)
        raise invalid_arguments([{"path": flags[0].lstrip("-"), "rule": "unknown",
                                  "expected": "a sender an installed harness recognises"}])
    return app.caller()


def normalise_alias(alias: str) -> str:
    """Trim and lower-case an alias; raises ``invalid_arguments`` when it is not usable."""
    norm = alias.strip().lower()
    if not ALIAS_RE.match(norm):
        raise invalid_arguments([{"path": "alias", "rule": "pattern", "expected": "1-64 of a-z 0-9 . _ -, starting with a letter or digit"}])
    return norm


async def resolve_target(app: App, target: str, caller: Caller) -> str:
    """Turn a CLI target into a recipient address.

    Order: a contact alias; an address (``harness:id``, ``role:name``); a form a plugin
    understands (e.g. an endpoint composite) through ``agent_link_resolve_address``; a bare
    id found by a complete scan of every harness. A scan that could not finish, or that
    finds the id more than once, refuses instead of guessing.

    :raises AgentLinkError: ``not_found``, ``ambiguous``, ``archived``, or the harness's
        ``<harness>_unavailable`` when a scan was incomplete.
    """
    target = target.strip()
    contact = app.store.conn.execute("SELECT address FROM contacts WHERE alias = ?", (target.lower(),)).fetchone()
    if contact is not None:
        return contact["address"]
    if is_address(target):
        recipient, _, _ = await app.target_address(target, caller)
        return recipient
    routed = await app.hooks.aresolve_address(target, caller.address)
    if routed is not None:
        return routed["address"]
    from agent_link_core.directory import gather_listings

    listings = await gather_listings(app.harnesses, include_archived=True, limit=100_000)
    matches = [s for listing in listings.values() for s in listing.sessions if s.id == target or target in s.aliases]
    incomplete = [name for name, listing in listings.items() if not listing.complete]
    if len(matches) > 1:
        raise AgentLinkError("ambiguous", f"{target} is known to several harnesses or endpoints.",
                             {"query": target, "candidates": [{"address": s.address} for s in matches[:5]]},
                             hint="Use the full address or a contact alias.")
    if incomplete:
        name = incomplete[0]
        raise AgentLinkError(f"{name}_unavailable", f"Could not finish listing {name} sessions, so {target} cannot be resolved safely.",
                             {"searched": incomplete}, hint="Use the full address, or retry when every endpoint answers.")
    if not matches:  # a listing may leave a session out (one the host has not listed yet): ask by exact id
        for harness in app.harnesses.values():
            try:
                found = await app._get_session(harness, target)  # a plugin's failure is reported there
            except AgentLinkError:
                found = None
            if found is not None and found.id == target:
                matches.append(found)
        if len(matches) > 1:
            raise AgentLinkError("ambiguous", f"{target} is known to several harnesses or endpoints.",
                                 {"query": target, "candidates": [{"address": s.address} for s in matches[:5]]},
                                 hint="Use the full address or a contact alias.")
    if not matches:
        from agent_link_core.presence import suggestions

        close = suggestions(app.store, target, harnesses=app.harnesses)  # "teambob" finds team:bob
        raise AgentLinkError("not_found", f"No session has the id {target}, and no contact has that alias.",
                             {"query": target, "candidates": [{"address": a} for a in close]},
                             hint=(f"Did you mean {' or '.join(close)}? " if close else "")
                             + "An address is harness:id (for example team:bob, or <harness>:<session id>); "
                               "list sessions with `agent-link sessions`.")
    if matches[0].archived:
        raise AgentLinkError("archived", f"{matches[0].address} is archived.", {"address": matches[0].address})
    return matches[0].address


def awaits_nothing(app: App, target: str, sender: Caller) -> bool:
    """True when :func:`send_reliably` to ``target`` reaches no harness: a plain address
    (``team:bob``; no harness owns its scheme, not a role) from a sender no harness proves.
    Such a send only stores the message, so it can run without an event loop
    (:func:`agent_link_core.aio.run_inline`); a plugin's awaitable address answer is then
    awaited on a loop of its own (:meth:`agent_link_core.plugins.Hooks.aresolve_address`).

    :param target: the stripped CLI target.
    """
    if not is_address(target):
        return False
    scheme = address_scheme(target)
    owners = app.harnesses
    return scheme != "role" and scheme not in owners and address_scheme(sender.address) not in owners \
        and (sender.host or "") not in owners


async def send_reliably(
    app: App, target: str, text: str, *, sender: Caller, message_id: str | None = None, ttl_ms: int | None = None,
    reply_by: str | None = None, anticipation: str | None = None, retry: RetryPolicy = RetryPolicy(),
    retry_unknown: bool = False, require_known: bool = False, correlation_id: str | None = None,
    sender_project: str | None = None, sender_label: str | None = None, envelope_format: str | None = None,
) -> SendResult:
    """Send with one honest outcome, idempotent on ``message_id``.

    The same id with the same content is never stored twice: a message already delivered or
    accepted is not pushed again, one still queued is offered to its harness again (which
    first checks whether an earlier, interrupted push landed), an ``unknown`` one only with
    ``retry_unknown``; with other content it is rejected.
    ``ttl_ms`` counts from the first attempt: past it, nothing is pushed any more.
    Only pushes that failed before the host accepted them are retried automatically.
    ``require_known`` refuses a plain address no process has ever served (``rejected``
    with ``not_found`` and suggestions) instead of queueing it with a warning.

    ``message_id`` is a ULID or a UUID (any case); a UUID is stored as the ULID with the same
    128 bits and echoed as ``clientMessageId``. What defines the message for idempotency:
    sender, target, text, labels, ``ttl_ms``, ``correlation_id`` and the sender metadata
    (``sender_project``, ``sender_label``); changing any of them under the same id is
    ``rejected``. ``envelope_format`` names another model-visible form than agent-link's
    envelope, one the recipient's harness lists in its ``envelope_formats`` (else
    ``rejected``, nothing stored).

    :raises AgentLinkError: never for a refusal (that is ``rejected``); only for bad
        arguments (``invalid_arguments``) and an unusable state dir (``state_io_error``).
    """
    if ttl_ms is not None and ttl_ms <= 0:
        raise invalid_arguments([{"path": "ttl-ms", "rule": "minimum", "expected": "a positive number of ms"}])
    from agent_link_core.mailbox import ulid_of_uuid

    client_id = None
    if message_id is not None and not is_ulid(message_id.upper()) and ulid_of_uuid(message_id):
        client_id, message_id = message_id.lower(), ulid_of_uuid(message_id)
    elif message_id is not None:
        if not is_ulid(message_id.upper()):
            raise invalid_arguments([{"path": "message-id", "rule": "pattern", "expected": "a ULID (26 characters) or a UUID"}])
        message_id = message_id.upper()
    for path, value in (("correlation-id", correlation_id), ("from-project", sender_project), ("label", sender_label)):
        if value is not None and not (0 < len(value.strip()) <= 256):
            raise invalid_arguments([{"path": path, "rule": "length", "expected": "1-256 characters, not only spaces"}])
    fingerprint = {k: v for k, v in (("ttlMs", ttl_ms), ("correlationId", correlation_id), ("senderProject", sender_project),
                                     ("senderLabel", sender_label), ("clientMessageId", client_id),
                                     ("envelopeFormat", envelope_format)) if v is not None}
    try:
        recipient = await resolve_target(app, target, sender)
        if envelope_format is not None and envelope_format not in getattr(app.harnesses.get(address_scheme(recipient)), "envelope_formats", ()):
            raise invalid_arguments([{"path": "envelope", "rule": "unsupported",
                                      "expected": f"a target whose harness can show {envelope_format}"}])
        existing = app.mailbox.get_row(message_id) if message_id else None
        # the expiry is stored before the first push, so the envelope the target reads says it
        # (a resend keeps the stored one: it is fixed by the first attempt, never extended)
        expiry = {"expiresAt": now_ms() + ttl_ms} if ttl_ms is not None and existing is None else {}
        outcome = await app.send(caller=sender, to=recipient, body=text, anticipation=anticipation, reply_by=reply_by,
                                 message_id=message_id, tool="cli send", options={}, require_known=require_known,
                                 metadata={**({"fingerprint": fingerprint} if fingerprint else {}), **expiry,
                                           **({"envelopeFormat": envelope_format} if envelope_format else {})} or None)
    except AgentLinkError as exc:
        if exc.code == "invalid_arguments" and exc.details.get("errors", [{}])[0].get("rule") != "idempotency":
            raise
        return SendResult("rejected", message_id, None, error=exc.to_dict(),
                          fields={"clientMessageId": client_id} if client_id else {})
    row = app.mailbox.get_row(outcome.message["id"])
    expires_at = _expiry(app, row, ttl_ms, first_attempt=existing is None)
    result = SendResult("queued", row["id"], row["recipient"], duplicate=not outcome.created, expires_at=iso(expires_at) if expires_at else None,
                        warnings=list(outcome.warnings) + ([outcome.address_warning] if outcome.address_warning else []))
    result.fields.update({k: v for k, v in fingerprint.items() if k in ("correlationId", "clientMessageId")})
    delivery = outcome.delivery
    attempts = 1 if outcome.created and delivery is not None else 0
    # A resend with the same id finishes what an earlier attempt left: a message still queued
    # (that attempt died after storing it, or its push found the session unable to take it)
    # is offered again, and an unknown outcome on request. The harness checks whether an
    # earlier push landed before it sends anything, so nothing is pushed twice.
    previous = app.mailbox.push_outcome(row["id"]) if not outcome.created else None
    if previous == "queued" or (previous == "unknown" and retry_unknown):
        if expires_at is not None and now_ms() > expires_at:
            return SendResult("rejected", row["id"], row["recipient"], duplicate=True, expires_at=result.expires_at,
                              error={"code": "invalid_arguments", "message": "The message's time to live has passed."})
        delivery = await app.push(row, {})
        attempts += 1
    for delay in retry.delays_ms():
        if delivery is None or not delivery.retryable or (expires_at is not None and now_ms() + delay > expires_at):
            break
        import asyncio  # only a retry waits: a plain send never imports it

        await asyncio.sleep(delay / 1000)
        delivery = await app.push(row, {})
        attempts += 1
    result.attempts = attempts
    result.outcome = app.mailbox.push_outcome(row["id"])
    if delivery is not None:
        result.warnings += delivery.warnings
        result.fields.update(delivery.fields)
    return result


async def reply(
    app: App, message_id: str, text: str | None = None, *, sender: Caller, kind: str = "reply",
    envelope_format: str | None = None,
) -> dict[str, Any]:
    """Answer a message addressed to ``sender`` (a ULID, any case, or the UUID it was sent
    with): ``kind`` ``reply`` (``text`` required), ``decline`` (``text`` is the reason) or
    ``done`` (optional note). The answer goes to the original sender with a new id and
    ``inReplyTo`` set to the original; the original body is never copied.
    ``envelope_format`` as for :func:`send_reliably` (the original sender's harness must
    list it).

    :returns: ``reply_agent_link_message``'s result (``messageId``, ``replyToMessageId``,
        ``delivery``, ``resolution``, ``status`` ...).
    :raises AgentLinkError: ``not_found``, ``wrong_recipient``, ``already_resolved``,
        ``invalid_arguments``, ``body_too_large``, ``no_current_session``.
    """
    if envelope_format is not None:
        row = app.mailbox.require(message_id)
        if envelope_format not in getattr(app.harnesses.get(address_scheme(row["from_addr"])), "envelope_formats", ()):
            raise invalid_arguments([{"path": "envelope", "rule": "unsupported",
                                      "expected": f"a message from a harness that can show {envelope_format}"}])
    return await app.reply(caller=sender, message_id=message_id, resolution=kind, message=text,
                           metadata={"envelopeFormat": envelope_format} if envelope_format else None)


def _expiry(app: App, row: Any, ttl_ms: int | None, *, first_attempt: bool) -> int | None:
    """The message's expiry (ms), fixed by its first attempt and never extended."""
    import json

    meta = json.loads(row["metadata"] or "{}")
    if "expiresAt" in meta:
        return int(meta["expiresAt"])
    if ttl_ms is None or not first_attempt:
        return None
    expires = row["sent_at"] + ttl_ms
    meta["expiresAt"] = expires
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET metadata = ? WHERE id = ?", (json.dumps(meta), row["id"]))
    return expires


async def list_sessions(
    app: App, *, search: str | None = None, cwd: str | None = None, harness: str = "all", limit: int = 50,
    show_paths: bool = False, source: str | None = None, cursor: str | None = None,
) -> dict[str, Any]:
    """Every agent session on the machine, newest first, one page at a time (``limit`` 1-500,
    checked first). ``source`` keeps sessions of one source kind (a harness's ``source``
    field, e.g. how the session was started, or one of its surfaces).

    :param cursor: the ``nextCursor`` of an earlier answer: the page after it.
    :returns: ``{"version": 1, "sessions": [...], "providers": {...}, "complete", "hasMore",
        "nextCursor", "filters", "filteredOut"}``: ``complete`` only when the answer holds
        every session the sources hold for the filters (first page, nothing after it, every
        provider complete); ``filters`` the filters applied (archived sessions are always
        left out), ``filteredOut`` how many sessions each left out. Without ``show_paths``
        each session's cwd is reduced to its folder name.
    :raises AgentLinkError: ``invalid_arguments`` for a bad limit or cursor.
    """
    if not 1 <= limit <= 500:
        raise invalid_arguments([{"path": "limit", "rule": "range", "expected": "1-500"}])
    from agent_link_core.directory import decode_cursor, gather_listings, listing_depth, page_of, providers_view, score, was_cut

    position = decode_cursor(cursor, "sessions")
    depth = listing_depth(position, limit)
    listings = await gather_listings(app.harnesses, only=harness, limit=depth)
    sessions = [s for listing in listings.values() for s in listing.sessions] + app.present_sessions(harness)
    want = (cwd or "").rstrip("/")
    wanted = (("archived", True, lambda s: not s.archived), ("source", source, lambda s: of_source(s, source or "")),
              ("cwd", cwd, lambda s: (s.cwd or "").rstrip("/") == want),
              ("search", search, lambda s: score(s, search or "")[0] > 0))
    page = page_of(sessions, position, limit, [(name, keep) for name, value, keep in wanted if value],
                   cut=was_cut(listings, depth))
    providers = providers_view(listings)
    if not show_paths:  # a provider's report names the folders it searched: home-relative then
        providers = home_relative(providers, app.env.get("HOME") or os.path.expanduser("~"))
    return {"version": SESSIONS_FORMAT_VERSION, "sessions": [_public_view(s, show_paths) for s in page.sessions],
            "providers": providers,
            "complete": page.first and not page.has_more and all(p["complete"] for p in providers.values()),
            "hasMore": page.has_more, "nextCursor": page.next_cursor,
            "filters": {"harness": harness, "includeArchived": False, "source": source, "cwd": cwd, "search": search},
            "filteredOut": page.filtered_out}


def home_relative(value: Any, home: str) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings, ...) with every string that is the home
    folder ``home`` or a path under it written ``~`` / ``~/...``; default output carries no
    absolute home paths."""
    home = home.rstrip("/")
    if isinstance(value, str):
        if home and (value == home or value.startswith(home + "/")):
            return "~" + value[len(home):]
        return value
    if isinstance(value, dict):
        return {k: home_relative(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [home_relative(v, home) for v in value]
    return value


def of_source(session: Any, source: str) -> bool:
    """True when ``session`` has the source kind ``source`` (its ``source`` field or a surface)."""
    return session.extra.get("source") == source or source in session.surface


def _public_view(session: Any, show_paths: bool) -> dict[str, Any]:
    """A session's view for output: without ``show_paths`` the cwd is only its folder name
    and path-like fields are left out."""
    view = session_view(session)
    if not show_paths:
        view["cwd"] = (session.cwd or "").rstrip("/").rsplit("/", 1)[-1] or None
        view = {k: v for k, v in view.items() if not _looks_private(k)}
    return view


def _looks_private(key: str) -> bool:
    return key in ("path", "transcriptPath", "socketPath", "rolloutPath")


# -- contacts ------------------------------------------------------------------------


def add_contact(app: App, alias: str, address: str, *, project: str | None = None, label: str | None = None) -> dict[str, Any]:
    """Bind ``alias`` to a session address (one alias per session, unique aliases).

    :raises AgentLinkError: ``invalid_arguments`` for a bad alias or address, an alias bound
        elsewhere, or a session that already has an alias (rename that one instead).
    """
    norm = normalise_alias(alias)
    if not is_address(address):
        raise invalid_arguments([{"path": "address", "rule": "pattern", "expected": "an address such as <harness>:<id>"}])
    with app.store.write() as conn:
        taken = conn.execute("SELECT address FROM contacts WHERE alias = ?", (norm,)).fetchone()
        if taken is not None and taken["address"] != address:
            raise invalid_arguments([{"path": "alias", "rule": "unique", "expected": f"an alias not already bound (to {taken['address']})"}])
        other = conn.execute("SELECT alias FROM contacts WHERE address = ? AND alias != ?", (address, norm)).fetchone()
        if other is not None:
            raise invalid_arguments([{"path": "address", "rule": "one_alias", "expected": f"a session without an alias (it is {other['alias']!r}; rename it)"}])
        conn.execute(
            "INSERT INTO contacts (alias, address, project, label, created_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (alias) DO UPDATE SET project = COALESCE(excluded.project, project), label = COALESCE(excluded.label, label)",
            (norm, address, project, label, now_ms()),
        )
    return contact(app, norm)


def rename_contact(app: App, old: str, new: str) -> dict[str, Any]:
    """Rename an alias; raises ``not_found`` / ``invalid_arguments`` (new alias taken)."""
    old_n, new_n = normalise_alias(old), normalise_alias(new)
    with app.store.write() as conn:
        if conn.execute("SELECT 1 FROM contacts WHERE alias = ?", (old_n,)).fetchone() is None:
            raise AgentLinkError("not_found", f"There is no contact {old_n!r}.", {"query": old_n, "candidates": []})
        if old_n != new_n and conn.execute("SELECT 1 FROM contacts WHERE alias = ?", (new_n,)).fetchone():
            raise invalid_arguments([{"path": "new", "rule": "unique", "expected": "an alias not already bound"}])
        conn.execute("UPDATE contacts SET alias = ? WHERE alias = ?", (new_n, old_n))
    return contact(app, new_n)


def remove_contact(app: App, alias: str) -> dict[str, Any]:
    """Drop an alias; raises ``not_found``. Returns the removed contact."""
    norm = normalise_alias(alias)
    gone = contact(app, norm)
    with app.store.write() as conn:
        conn.execute("DELETE FROM contacts WHERE alias = ?", (norm,))
    return gone


def contact(app: App, alias: str) -> dict[str, Any]:
    """One contact; raises ``not_found``."""
    row = app.store.conn.execute("SELECT * FROM contacts WHERE alias = ?", (alias,)).fetchone()
    if row is None:
        raise AgentLinkError("not_found", f"There is no contact {alias!r}.", {"query": alias, "candidates": []})
    return _contact_view(row)


def list_contacts(app: App) -> list[dict[str, Any]]:
    """All contacts, by alias."""
    return [_contact_view(r) for r in app.store.conn.execute("SELECT * FROM contacts ORDER BY alias")]


def _contact_view(row: Any) -> dict[str, Any]:
    return {"alias": row["alias"], "address": row["address"], "project": row["project"], "label": row["label"],
            "lastSeen": iso(row["last_seen"]) if row["last_seen"] else None}


async def who(app: App, *, source: str | None = None) -> dict[str, Any]:
    """Live sessions merged with contacts; refreshes a contact's project, label, last seen.
    ``source`` keeps one source kind (:func:`list_sessions`)."""
    listing = await list_sessions(app, limit=500, source=source)
    by_address = {s["address"]: s for s in listing["sessions"]}
    with app.store.write() as conn:
        for row in conn.execute("SELECT * FROM contacts").fetchall():
            live = by_address.get(row["address"])
            if live is not None:
                conn.execute("UPDATE contacts SET project = ?, label = ?, last_seen = ? WHERE alias = ?",
                             (live.get("cwd"), live.get("title"), now_ms(), row["alias"]))
    contacts = {c["address"]: c for c in list_contacts(app)}
    agents = [{**s, "alias": contacts.get(s["address"], {}).get("alias")} for s in listing["sessions"]]
    offline = [c for a, c in contacts.items() if a not in by_address]
    return {"version": 1, "sessions": agents, "offlineContacts": offline, "providers": listing["providers"]}


async def find(app: App, query: str, *, show_paths: bool = False, source: str | None = None) -> dict[str, Any]:
    """``none`` / ``one`` / ``many`` agents matching ``query``: an exact alias wins without
    any discovery; otherwise alias, project, title and id are searched over complete listings
    and the live plain addresses. Without ``show_paths`` a match's cwd is its folder name.

    :raises AgentLinkError: ``<harness>_unavailable`` when a listing could not be completed
        (a possibly wrong "none" or "one" is never returned).
    """
    norm = query.strip().lower()
    row = app.store.conn.execute("SELECT * FROM contacts WHERE alias = ?", (norm,)).fetchone()
    if row is not None:
        return {"version": 1, "verdict": "one", "matches": [{**_contact_view(row), "matchedBy": "alias"}]}
    from agent_link_core.directory import gather_listings, score

    listings = await gather_listings(app.harnesses, limit=100_000)
    incomplete = [n for n, listing in listings.items() if not listing.complete]
    if incomplete:
        raise AgentLinkError(f"{incomplete[0]}_unavailable", f"Could not list every {incomplete[0]} session, so the search would be incomplete.",
                             {"searched": incomplete}, hint="Retry when every endpoint answers.")
    contacts = {c["address"]: c for c in list_contacts(app)}
    matches = []
    for s in [s for listing in listings.values() for s in listing.sessions] + app.present_sessions():
        if source and not of_source(s, source):
            continue
        alias = contacts.get(s.address, {}).get("alias") or ""
        if norm in alias or score(s, query)[0] > 0:
            matches.append({**_public_view(s, show_paths), "alias": alias or None})
    for address, c in contacts.items():
        if norm in c["alias"] and all(m["address"] != address for m in matches):
            matches.append({**c, "matchedBy": "alias"})
    verdict = "none" if not matches else ("one" if len(matches) == 1 else "many")
    return {"version": 1, "verdict": verdict, "matches": matches}

