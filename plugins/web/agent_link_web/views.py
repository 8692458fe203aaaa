"""What the page shows, gathered from the public API of the core and of the conversations and search
plugins as plain dicts for the templates.

Nothing here builds markup: templates escape every value (Jinja2 autoescape), and every
string an agent wrote (bodies, titles, addresses, reasons, evidence) stays plain text.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agent_link_core.app import App
from agent_link_conversations.conversation import conversation, conversation_ids, recent_conversations
from agent_link_core.mailbox import Visibility, batches, iso
from agent_link_core.boundary import describe
from agent_link_core.errors import AgentLinkError
from agent_link_web.panels import Panel, PanelAction, PanelLink, PanelView, drawing_for, panels
from agent_link_search.index import search, session_titles
from agent_link_core.store import now_ms
from agent_link_web.context import AUTHOR_KEY, ORIGIN, may_act_for

log = logging.getLogger(__name__)
PREVIEW_CHARS = 160
MAIL_ADDRESS_SCAN = 500
#: open reply/action mail the page lists under "Waiting on whom" (oldest first)
WAITING_LIMIT = 50
#: messages of a conversation shown in its thread on the overview (the newest ones)
THREAD_SHOWN = 4
#: how far back a thread is read to show its newest messages and count the rest
THREAD_READ = 200
#: what an agent is doing now (:func:`activity`) and its words on the page, in the order the
#: page lists agents
ACTIVITIES = {"busy": "busy", "idle": "idle", "running": "running", "stopped": "not running", "unknown": "seen in mail"}


def sees_everything(app: App) -> bool:
    """True when the page shows every agent's mail: only with ``AGENT_LINK_INSPECT_ALL``,
    the same setting that opens every mailbox to the MCP tools and the CLI."""
    return bool(app.config.get("AGENT_LINK_INSPECT_ALL"))


def person_view(app: App, address: str) -> Visibility:
    """What the person at the page (``address``, ``user:<name>``) may read: the one read
    rule of every read path. They see the mail they sent or received; every message only
    with ``AGENT_LINK_INSPECT_ALL`` (the page says which)."""
    return app.mailbox.visible_to(address, all_mail=sees_everything(app))


async def render_panels(app: App, visibility: Visibility) -> list[dict[str, Any]]:
    """Every plugin panel, rendered for a reader; a failing one becomes ``{"error": ...}``."""
    out = []
    for panel in panels(app):
        out.append(await render_panel(app, panel, visibility))
    return out


#: a panel's code may run this long (ms, the hook budget if that is smaller); then it is cut
#: (a synchronous call on the main thread, by the boundary's SIGALRM) and skipped afterwards
PANEL_BUDGET_MS = 5_000
#: the most text (bytes of UTF-8 in its cells, headings and notes) one panel may show
MAX_PANEL_BYTES = 1 << 20
#: what :func:`call_panel` answers for a call that faulted
FAILED = object()


def panel_owner(app: App, panel: Panel) -> str:
    """The plugin that registered ``panel`` (the one to blame, and to turn off, for its faults)."""
    return app.hooks.owner("panel", panel.name) or "?"


def panel_hook(panel: Panel) -> str:
    """How problems name a panel's calls: ``panel <name>`` (as tools are ``tool <name>``)."""
    return f"panel {panel.name}"


@contextmanager
def panel_budget(app: App) -> Iterator[float | None]:
    """The boundary's budget lowered to :data:`PANEL_BUDGET_MS` for the synchronous call of a
    panel's code inside the block (0, hooks unbounded, stays 0); yields it in seconds (None:
    unbounded). Nothing may be awaited inside: other requests' hooks keep the full budget."""
    boundary = app.hooks.boundary
    before = boundary.timeout_ms
    boundary.timeout_ms = min(before, PANEL_BUDGET_MS) if before else 0
    try:
        yield boundary.timeout_ms / 1000 or None
    finally:
        boundary.timeout_ms = before


async def call_panel(app: App, panel: Panel, hook: str, fn: Callable[[], Any], *,
                     passing: tuple[type[BaseException], ...] = ()) -> Any:
    """``fn()``, a panel's code (its ``render`` or ``act``), and what it returns awaited, through
    the boundary: whatever it raises (SystemExit and KeyboardInterrupt included, but the
    ``passing`` types) or a call outliving the panel budget is its plugin's fault, reported as
    a problem (``agent-link health`` and ``agent-link plugins`` name it); then the answer is
    :data:`FAILED`. An awaitable answer is awaited within the panel budget, each synchronous
    step of it within the hook budget."""
    boundary, plugin = app.hooks.boundary, panel_owner(app, panel)
    with panel_budget(app) as bound_s:
        result = boundary.call(plugin, hook, fn, default=FAILED, passing=passing)
    if result is not FAILED and inspect.isawaitable(result):
        def timed_out() -> Any:
            boundary.hung[(plugin, hook)] = math.inf  # not awaited again by this page server
            boundary.fault(plugin, hook, f"did not finish within {bound_s:g} s; not called again by this page server",
                           fix="A panel must draw from a few quick reads.")
            return FAILED

        awaited = result
        result = await boundary.acall(plugin, hook, lambda: awaited, bound_s=bound_s, default=FAILED,
                                      passing=passing, on_timeout=timed_out)
    return result


def failed_panel(app: App, panel: Panel) -> dict[str, Any]:
    """A panel whose render failed: ``error`` says why (its problem as the boundary recorded it) and how to turn its plugin off."""
    plugin, hook = panel_owner(app, panel), panel_hook(panel)
    problem = app.hooks.boundary.problem_of(plugin, hook)
    why = problem.error if problem is not None else "failed"
    return {"name": panel.name, "title": panel.title, "error": f"{why}", "plugin": plugin,
            "disable": f"AGENT_LINK_DISABLE_PLUGINS={plugin}"}


async def render_panel(app: App, panel: Panel, visibility: Visibility) -> dict[str, Any]:
    """One panel as template data, drawn for ``visibility`` (:func:`agent_link_web.panels.panel_viewer`):
    ``{name, title, view?: PanelView, rows (cells as {text, messageId?, action?}), error?}``.

    The render runs through the boundary (:func:`call_panel`); what it raises, an answer that is
    not a :class:`PanelView` or shows more than :data:`MAX_PANEL_BYTES`, or a render outliving
    :data:`PANEL_BUDGET_MS`, is its plugin's fault: the section says so (``error``, ``plugin``,
    ``disable``), the rest of the page is drawn."""
    hook = panel_hook(panel)
    with drawing_for(visibility):
        view = await call_panel(app, panel, hook, lambda: panel.render(app))
    if view is FAILED:
        return failed_panel(app, panel)
    try:
        return _drawn(panel, view)
    except Exception as exc:  # a view the page cannot draw: the plugin's fault, never the page's
        why = str(exc) if isinstance(exc, _Undrawable) else f"returned a PanelView that cannot be drawn ({describe(exc)})"
        app.hooks.boundary.fault(panel_owner(app, panel), hook, why,
                                 fix=f"render returns a PanelView of plain cells, at most {MAX_PANEL_BYTES} bytes of text.")
        return failed_panel(app, panel)


class _Undrawable(ValueError):
    """Why a panel's answer is not drawn (the words of its problem)."""


def _drawn(panel: Panel, view: Any) -> dict[str, Any]:
    """``view`` as template data; :class:`_Undrawable` when it is no :class:`PanelView` or shows more
    than :data:`MAX_PANEL_BYTES` of text (counted as it is read: a huge view is not copied whole)."""
    if not isinstance(view, PanelView):
        raise _Undrawable(f"returned {type(view).__name__}; expected a PanelView")
    size = 0

    def text(value: Any) -> str:
        nonlocal size
        shown = "" if value is None else str(value)
        size += len(shown.encode("utf-8", "replace")) + 1
        if size > MAX_PANEL_BYTES:
            raise _Undrawable(f"returned a view of more than {MAX_PANEL_BYTES} bytes of text; at most {MAX_PANEL_BYTES} are shown")
        return shown

    def cell(value: Any) -> dict[str, Any]:
        return {k: text(v) for k, v in _cell(value, panel).items()}

    return {"name": panel.name, "title": panel.title, "columns": [text(c) for c in view.columns],
            "rows": [[cell(c) for c in row] for row in view.rows], "empty": text(view.empty),
            "note": None if view.note is None else text(view.note),
            "labels": {text(a): [text(n) for n in names] for a, names in view.agent_labels.items()}}


def _cell(value: Any, panel: Panel) -> dict[str, Any]:
    if isinstance(value, PanelAction):  # a button only where the panel can act on it
        return {"text": value.label, "action": value.key} if panel.act is not None else {"text": ""}
    if isinstance(value, PanelLink):
        return {"text": value.text, "messageId": value.message_id}
    if value is None:
        return {"text": ""}
    if isinstance(value, bool):
        return {"text": "yes" if value else "no"}
    if not isinstance(value, (str, int, float)):  # str() of anything else would run the plugin's code
        raise _Undrawable(f"returned a cell of type {type(value).__name__}; cells are text, numbers, booleans, None, PanelLink or PanelAction")
    return {"text": str(value)}


def activity(session: dict[str, Any]) -> str:
    """What an agent is doing now, from what its harness reports in a listed session view:
    ``busy`` (a Codex thread ``active``, a Claude session ``busy``), ``idle`` (the host says
    it waits for work), ``running`` (live, its host does not say which), ``stopped`` (not
    running) or ``unknown`` (only seen in the mail)."""
    status = session.get("liveStatus") or session.get("status")
    if session.get("loaded") is False:
        return "stopped"
    if status in ("busy", "active"):
        return "busy"
    if status == "idle":
        return "idle"
    return "running" if session.get("loaded") else "unknown"


async def agents(app: App, person: str) -> dict[str, Any]:
    """Every agent the harnesses list (live or not) plus addresses seen only in the mail the
    person may read, each with the labels panels give it (roles held), what it is doing now
    (:func:`activity`) and whom it waits on or owes an answer (open reply/action mail the
    person may read, :func:`waiting`). Busy agents first, then idle, running, stopped, the
    ones only seen in the mail; ``counts`` holds how many of each."""
    listed = await app.list_agents(limit=200)
    visibility = person_view(app, person)
    labels: dict[str, list[str]] = {}
    for panel in await render_panels(app, visibility):
        for address, names in (panel.get("labels") or {}).items():
            labels.setdefault(address, []).extend(str(n) for n in names)
    rows = []
    known = set()
    for s in listed["sessions"]:
        known.add(s["address"])
        rows.append({"address": s["address"], "harness": s["harness"], "title": s.get("title"), "cwd": s.get("cwd"),
                     "live": s.get("loaded"), "lastActivityAt": s.get("lastActivityAt"), "labels": labels.get(s["address"], []),
                     "mailOnly": False, "activity": activity(s),
                     # a session another machine lists (the machines plugin): which one, and whether its listing is stale
                     "machine": s.get("machine"), "machineStale": bool(s.get("machineStale"))})
    correspondents = _recent_correspondents(app, MAIL_ADDRESS_SCAN, visibility)
    titles = session_titles(app.store.conn, [r["address"] for r in correspondents if r["address"] not in known])
    for r in correspondents:
        if r["address"] in known or r["address"] == person:
            continue
        known.add(r["address"])
        rows.append({"address": r["address"], "harness": r["address"].split(":", 1)[0], "title": titles.get(r["address"]),
                     "cwd": None, "live": None, "lastActivityAt": iso(r["at"]), "labels": labels.get(r["address"], []),
                     "mailOnly": True, "activity": "unknown", "machine": None, "machineStale": False})
    for address, names in labels.items():
        if address not in known and address != person:
            rows.append({"address": address, "harness": address.split(":", 1)[0], "title": None, "cwd": None, "live": None,
                         "lastActivityAt": None, "labels": names, "mailOnly": True, "activity": "unknown", "machine": None,
                         "machineStale": False})
    waits_on: dict[str, list[str]] = {}
    owes: dict[str, list[str]] = {}
    for w in waiting(app, person):
        for table, key, other in ((waits_on, w["from"], w["to"]), (owes, w["to"], w["from"])):
            if other not in table.setdefault(key, []):
                table[key].append(other)
    for row in rows:
        row["waitsOn"], row["owes"] = waits_on.get(row["address"], []), owes.get(row["address"], [])
    rows.sort(key=lambda row: list(ACTIVITIES).index(row["activity"]))  # stable: newest first within each
    counts = {name: sum(1 for row in rows if row["activity"] == name) for name in ACTIVITIES}
    problems = [{"harness": name, "reason": p.get("reason") or "not fully listed"}
                for name, p in listed["providers"].items() if not p.get("complete", True)]
    return {"agents": rows, "problems": problems, "counts": counts}


def _preview(body: str) -> str:
    line = " ".join(body.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def conversations(app: App, person: str, limit: int = 25) -> list[dict[str, Any]]:
    """The conversations with the newest activity, with their first message's state and
    their newest messages as a thread (:func:`threads`)."""
    out = []
    visibility = person_view(app, person)
    now = now_ms()
    found = recent_conversations(app.mailbox, visibility, limit=limit)
    # every root and last message in one query, the roots' states in one batch (not per conversation)
    rows = {row["id"]: row for row in app.mailbox.rows([c[key] for c in found for key in ("rootId", "lastId")])}
    roots = [rows[c["rootId"]] for c in found if c["rootId"] in rows]
    states = {row["id"]: state for row, state in zip(roots, app.mailbox.states(roots, now), strict=True)}
    chains = threads(app, visibility, [row["id"] for row in roots], now)
    for c in found:
        root = rows.get(c["rootId"])
        last = rows.get(c["lastId"])
        if root is None or last is None:
            continue
        state = states[root["id"]]
        out.append({"rootId": c["rootId"], "participants": c["participants"], "count": c["count"], "lastAt": iso(c["lastAt"]),
                    "status": state.status, "delivery": state.delivery, "anticipation": root["anticipation"],
                    "preview": _preview(last["body"]), "lastFrom": last["from_addr"], "lastAgo": ago(c["lastAt"], now),
                    **chains[root["id"]]})
    return out


def threads(app: App, visibility: Visibility, root_ids: list[str], now: int) -> dict[str, dict[str, Any]]:
    """For each of ``root_ids``, the newest :data:`THREAD_SHOWN` messages of its conversation
    the reader may see, oldest first, as ``{"messages": [{id, from, to, preview, sentAt, ago,
    anticipation, status, answers (the address whose message it answers, or None)}],
    "earlier": count not shown}``; a fixed number of queries for them all."""
    ids = conversation_ids(app.store.conn, root_ids, THREAD_READ)
    rows = {row["id"]: row for row in app.mailbox.rows([i for chain in ids.values() for i in chain])}
    visible = {root: [rows[i] for i in chain if i in rows and visibility.allows(rows[i])] for root, chain in ids.items()}
    last = [r for chain in visible.values() for r in chain[-THREAD_SHOWN:]]
    states = {r["id"]: state for r, state in zip(last, app.mailbox.states(last, now), strict=True)}
    out = {}
    for root, chain in visible.items():
        senders = {r["id"]: r["from_addr"] for r in chain}
        shown = [{"id": r["id"], "from": r["from_addr"], "to": r["recipient"], "preview": _preview(r["body"]),
                  "sentAt": iso(r["sent_at"]), "ago": ago(r["sent_at"], now), "anticipation": r["anticipation"],
                  "status": states[r["id"]].status, "answers": senders.get(r["reply_to"]) if r["reply_to"] else None}
                 for r in chain[-THREAD_SHOWN:]]
        out[root] = {"messages": shown, "earlier": len(chain) - len(shown)}
    return out


def _recent_correspondents(app: App, scan: int, visibility: Visibility) -> list[Any]:
    """``(address, at)`` rows of the senders and recipients of the newest ``scan`` sends that
    ``visibility`` sees, each with its latest ``sent_at`` (epoch ms), newest first."""
    if not visibility.everything:
        where, params = visibility.sql("messages")
        return app.store.conn.execute(
            f"WITH recent AS (SELECT from_addr, recipient, sent_at FROM messages WHERE {where}"
            " ORDER BY sent_at DESC LIMIT ?) SELECT address, MAX(sent_at) AS at FROM (SELECT from_addr AS address,"
            " sent_at FROM recent UNION ALL SELECT recipient, sent_at FROM recent) GROUP BY address ORDER BY at DESC",
            [*params, scan],
        ).fetchall()
    return app.store.conn.execute(
        "SELECT address, MAX(sent_at) AS at FROM (SELECT from_addr AS address, sent_at FROM messages"
        " UNION ALL SELECT recipient, sent_at FROM messages ORDER BY sent_at DESC LIMIT ?) GROUP BY address"
        " ORDER BY at DESC",
        (scan,),
    ).fetchall()


def _open_expectations(app: App, visibility: Visibility, limit: int) -> list[Any]:
    """Open reply/action mail (not fyi) that ``visibility`` may read, oldest first, at most ``limit`` rows."""
    # No index starts with ``open``: one seek per recipient on (recipient, open, sent_at): the cost follows recipients and open mail, not all mail.
    where, params = visibility.sql("m")
    return app.store.conn.execute(
        "WITH RECURSIVE who(r) AS (SELECT (SELECT MIN(recipient) FROM messages)"
        " UNION ALL SELECT (SELECT MIN(recipient) FROM messages WHERE recipient > who.r) FROM who WHERE who.r IS NOT NULL)"
        " SELECT m.* FROM who JOIN messages m ON m.recipient = who.r AND m.open = 1"
        f" WHERE m.anticipation != 'fyi' AND {where} ORDER BY m.sent_at, m.id LIMIT ?",
        (*params, limit)).fetchall()


def last_event_seen(app: App, visibility: Visibility) -> int:
    """The newest audit event's sequence number of the messages ``visibility`` sees (0 for none)."""
    if visibility.everything:
        return app.mailbox.last_event_seq()
    where, params = visibility.sql("m")
    return int(app.store.conn.execute(
        f"SELECT COALESCE(MAX(seq), 0) FROM message_events WHERE message_id IN (SELECT m.id FROM messages m WHERE {where})",
        params).fetchone()[0])


def events_of(app: App, message_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The audit trails of messages: ``{message id: [{seq, kind, at (ISO), actor, via, data (decoded)}] oldest first}``."""
    trails: dict[str, list[dict[str, Any]]] = {i: [] for i in message_ids}
    for chunk, marks in batches(list(trails)):
        for r in app.store.conn.execute(
            f"SELECT message_id, seq, kind, at, actor, via, data FROM message_events WHERE message_id IN ({marks}) ORDER BY seq",
            chunk,
        ):
            trails[r["message_id"]].append({"seq": r["seq"], "kind": r["kind"], "at": iso(r["at"]), "actor": r["actor"],
                                            "via": r["via"], "data": json.loads(r["data"] or "{}")})
    return trails


def waiting(app: App, person: str, limit: int = WAITING_LIMIT) -> list[dict[str, Any]]:
    """What waits on whom: open reply/action mail the person may read, oldest first, each as
    ``{id, from (who waits), to (who owes the answer), anticipation, status, sentAt, ago,
    replyBy, due (words: "due in 5 min", "overdue by 2 h", None without a deadline),
    overdue (bool), preview}``."""
    rows = _open_expectations(app, person_view(app, person), limit)
    now = now_ms()
    out = []
    for r, state in zip(rows, app.mailbox.states(rows, now), strict=True):
        out.append({"id": r["id"], "from": r["from_addr"], "to": r["recipient"], "anticipation": r["anticipation"],
                    "status": state.status, "sentAt": iso(r["sent_at"]), "ago": ago(r["sent_at"], now),
                    "replyBy": iso(r["reply_by"]) if r["reply_by"] else None, **due(r["reply_by"], now),
                    "preview": _preview(r["body"])})
    return out


def due(deadline: int | None, now: int) -> dict[str, Any]:
    """A reply-by deadline (epoch ms, or None) for people: ``{"due": "due in 5 min" | "overdue
    by 2 h" | None, "overdue": bool}``."""
    if deadline is None:
        return {"due": None, "overdue": False}
    if deadline <= now:
        return {"due": f"overdue by {span(now - deadline)}", "overdue": True}
    return {"due": f"due in {span(deadline - now)}", "overdue": False}


def span(ms: int) -> str:
    """A duration for people: ``"40 s"``, ``"12 min"``, ``"3 h 5 min"``, ``"2 d 4 h"`` (``ms``
    milliseconds, negative taken as 0; from a minute on, rounded to the nearest minute)."""
    s = max(ms, 0) // 1000
    if s < 60:
        return f"{s} s"
    m = (max(ms, 0) + 30_000) // 60_000
    if m < 60:
        return f"{m} min"
    h = m // 60
    if h < 48:
        return f"{h} h {m % 60} min" if m % 60 else f"{h} h"
    return f"{h // 24} d {h % 24} h" if h % 24 else f"{h // 24} d"


def ago(at_ms: int, now: int) -> str:
    """How long ago ``at_ms`` (epoch ms) was, for people: ``"just now"``, ``"12 min ago"``."""
    return "just now" if now - at_ms < 5000 else f"{span(now - at_ms)} ago"


def inbox(app: App, person: str) -> list[dict[str, Any]]:
    """Open mail addressed to the person (undelivered, or reply/action not yet resolved), each
    with its age (``ago``) and deadline (:func:`due`)."""
    now = now_ms()
    rows = app.mailbox.open_for(person, 50)
    out = app.mailbox.to_views(rows, now=now)
    for row, view in zip(rows, out, strict=True):
        view["preview"] = _preview(row["body"])
        view["ago"] = ago(row["sent_at"], now)
        view.update(due(row["reply_by"], now))
    return out


def message_card(app: App, view: dict[str, Any], row: Any, person: str, act_for: tuple[str, ...],
                 titles: dict[str, str] | None = None, trail: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything the page shows about one message: the core's view, the body (plain text),
    its audit trail (delivery evidence), who may answer it here.

    :param titles: ``{address: session title}`` already read for a list of cards
        (:func:`agent_link_search.index.session_titles`); None reads this card's two.
    :param trail: the message's events already read (``events_of``); None reads them.
    """
    if titles is None:
        titles = session_titles(app.store.conn, [row["from_addr"], row["recipient"]])
    meta = json.loads(row["metadata"] or "{}")
    events = []
    for e in events_of(app, [row["id"]])[row["id"]] if trail is None else trail:
        data = e["data"]
        evidence = data.get("evidence") if isinstance(data, dict) else None
        extra = {k: v for k, v in data.items() if k != "evidence"} if isinstance(data, dict) else {}
        events.append({**e, "evidence": json.dumps(evidence, ensure_ascii=False, sort_keys=True) if evidence else None,
                       "extra": json.dumps(extra, ensure_ascii=False, sort_keys=True) if extra else None})
    return {
        **view,
        "body": row["body"],
        "fromTitle": titles.get(row["from_addr"]),
        "toTitle": titles.get(row["recipient"]),
        "byPerson": meta.get(AUTHOR_KEY) == ORIGIN,
        "events": events,
        "forPerson": row["recipient"] == person and view["resolution"] is None,
        "actForAgent": view["resolution"] is None and row["recipient"] != person and may_act_for(act_for, row["recipient"]),
    }


def conversation_view(app: App, person: str, message_id: str, act_for: tuple[str, ...]) -> dict[str, Any]:
    """A conversation with full cards, oldest first, and its ``participants`` (addresses in
    the order they appear); raises the core's errors."""
    found = conversation(app.mailbox, person_view(app, person), message_id, envelopes=False)
    rows = {row["id"]: row for row in app.mailbox.rows([view["id"] for view in found["messages"]])}
    titles = session_titles(app.store.conn, [a for row in rows.values() for a in (row["from_addr"], row["recipient"])])
    trails = events_of(app, list(rows))
    cards = [message_card(app, view, rows[view["id"]], person, act_for, titles, trails[view["id"]]) for view in found["messages"]]
    participants = list(dict.fromkeys(a for card in cards for a in (card["from"], card["to"])))
    return {**found, "cards": cards, "participants": participants}


def mark_seen(app: App, person: str, cards: list[dict[str, Any]]) -> str | None:
    """The person opened these messages on the page: that is delivery evidence for the
    ones addressed to them.

    :returns: why they stay unmarked when the database refuses the write (read-only, damaged,
        busy): the page still shows them, and says so; else None.
    """
    for card in cards:
        if card["to"] == person and card["delivery"] == "queued":
            try:
                app.mailbox.mark_delivered(card["id"], "web-page", {"shownTo": person})
            except AgentLinkError as exc:
                return f"{exc.message} Nothing was marked delivered."
    return None


def search_view(app: App, person: str, query: str, *, status: str | None, sender: str | None, recipient: str | None,
                cursor: str | None) -> dict[str, Any]:
    """Search results for the page (hits kept as pieces, so the template marks them)."""
    return search(app.mailbox, person_view(app, person), query, from_address=sender or None, to_address=recipient or None,
                  status=status or None, limit=30, cursor=cursor or None)
