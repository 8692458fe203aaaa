"""Full-text search over the mailbox (SQLite FTS5).

The index is :mod:`agent_link_search.schema` (``message_fts`` over the core's messages, kept in
step by triggers; ``session_titles``, filled by :func:`note_session_titles` from the core's
``agent_link_sessions_listed`` hook whenever agents are listed). A query matching a session's
title finds the messages that session sent or received.

Query language (:func:`fts_query`), meant for people and models rather than FTS5's own
syntax: words (all must match), ``"exact phrases"``, ``OR``, ``NOT``, ``AND``, parentheses and
``prefix*``. Punctuation inside a word is fine (``team:alice``, ``e-mail``). A query that
cannot be read gets ``invalid_arguments`` saying why, never SQLite's error text.

The index reads the core's ``messages`` table (its triggers, the join of a result page and the
``resolutions`` of a status filter): an FTS5 external-content index lives beside the rows it
indexes, inside the database, so the rule that plugins reach core tables only through the
mailbox names this module as an exception (tests/test_surface.py).

Results come newest first (by rowid, i.e. storage order), ``limit`` at a time, with an opaque
``cursor`` for the next page. Reading the FTS index in rowid order keeps a page's cost nearly
independent of how much mail is stored.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agent_link_core.envelope import escape_text
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import Mailbox, Visibility, iso, parse_iso_ms
from agent_link_core.model import Caller
from agent_link_core.store import now_ms

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

STATUSES = ("pending", "replied", "declined", "done", "unresolved", "expired")
RESOLVED_KIND = {"replied": "reply", "declined": "decline", "done": "done"}
SNIPPET_TOKENS = 16
MAX_QUERY_CHARS = 1000
MAX_TITLE_ADDRESSES = 50
HIT_OPEN, HIT_CLOSE = "<hit>", "</hit>"
_MARK_OPEN, _MARK_CLOSE = "\x02", "\x03"
_TOKEN_RE = re.compile(r'"|\(|\)|[^\s()"]+')
_OPERATORS = ("AND", "OR", "NOT")
_WORD_CHAR_RE = re.compile(r"\w")
_CURSOR_RE = re.compile(r"^r([0-9]{1,19})\Z")


def _query_error(reason: str, message: str) -> AgentLinkError:
    exc = invalid_arguments(
        [{"path": "query", "rule": "syntax", "expected": 'words, "exact phrases", OR, NOT, parentheses, prefix*'}],
        f"The search query could not be read: {message}",
    )
    exc.details["reason"] = reason
    exc.hint = 'Search for plain words; quote a phrase ("like this"); join alternatives with OR.'
    return exc


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def fts_query(query: str) -> str:
    """Translate a user's search query into an FTS5 MATCH expression.

    :param query: words, ``"phrases"``, ``AND``/``OR``/``NOT`` (upper case), parentheses,
        ``word*`` prefixes; at most 1,000 characters.
    :returns: an FTS5 expression in which every word and phrase is quoted, so punctuation
        in words never reaches FTS5's own syntax.
    :raises AgentLinkError: ``invalid_arguments`` (rule ``syntax``; ``details.reason``
        ``empty``, ``too_long``, ``unclosed_quote``, ``unbalanced_parentheses`` or
        ``dangling_operator``) for a query that cannot be read.
    """
    # FTS5 reads a MATCH expression as a C string: a NUL would cut it inside a quoted word
    # ("unterminated string"), so it separates words like a space.
    query = query.replace("\x00", " ")
    if len(query) > MAX_QUERY_CHARS:
        raise _query_error("too_long", f"it is longer than {MAX_QUERY_CHARS} characters.")
    parts: list[str] = []
    depth = 0
    expect_operand = True  # at the start, after an operator and after "("
    pos = 0
    while True:
        match = _TOKEN_RE.search(query, pos)
        if match is None:
            break
        token, pos = match.group(0), match.end()
        if token == '"':
            end = query.find('"', pos)
            if end < 0:
                raise _query_error("unclosed_quote", "a quote is opened and never closed.")
            text, pos = query[pos:end], end + 1
            prefix = query.startswith("*", pos)
            pos += int(prefix)
            if not _WORD_CHAR_RE.search(text):
                continue
            if not expect_operand:
                parts.append("AND")
            parts.append(_phrase(text) + ("*" if prefix else ""))
            expect_operand = False
        elif token == "(":
            if not expect_operand:
                parts.append("AND")
            parts.append("(")
            depth += 1
            expect_operand = True
        elif token == ")":
            if depth == 0:
                raise _query_error("unbalanced_parentheses", "a parenthesis is closed that was never opened.")
            if expect_operand:
                what = "empty parentheses" if parts[-1] == "(" else f"{parts[-1]} has nothing after it"
                raise _query_error("dangling_operator", f"{what}.")
            parts.append(")")
            depth -= 1
        elif token in _OPERATORS:
            if expect_operand:
                raise _query_error("dangling_operator", f"{token} needs words on both sides.")
            parts.append(token)
            expect_operand = True
        else:
            prefix = token.endswith("*")
            word = token.rstrip("*")
            if not _WORD_CHAR_RE.search(word):
                continue  # punctuation alone matches nothing FTS5 indexes
            if not expect_operand:
                parts.append("AND")
            parts.append(_phrase(word) + ("*" if prefix else ""))
            expect_operand = False
    if depth:
        raise _query_error("unbalanced_parentheses", "a parenthesis is opened and never closed.")
    if parts and expect_operand:
        raise _query_error("dangling_operator", f"{parts[-1]} has nothing after it.")
    if not parts:
        raise _query_error("empty", "it has no words to search for.")
    return " ".join(parts)


def note_session_titles(conn: sqlite3.Connection, sessions: Iterable[tuple[str, str | None]]) -> int:
    """Remember the titles sessions were listed with, so search finds their mail by title.

    Writes only what changed (one short transaction when something did; inside the caller's
    transaction when one is open).

    :param sessions: ``(address, title)`` pairs; sessions without a title are skipped.
    :returns: how many titles were new or changed.
    """
    wanted = {address: title for address, title in sessions if title}
    if not wanted:
        return 0
    known = dict(conn.execute("SELECT address, title FROM session_titles").fetchall())
    changed = [(a, t) for a, t in wanted.items() if known.get(a) != t]
    if not changed:
        return 0
    at = now_ms()
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for address, title in changed:
            conn.execute("DELETE FROM session_titles WHERE address = ?", (address,))
            conn.execute("INSERT INTO session_titles (address, title, seen_at) VALUES (?, ?, ?)", (address, title, at))
    except BaseException:
        if own:
            conn.execute("ROLLBACK")
        raise
    if own:
        conn.execute("COMMIT")
    return len(changed)


def session_title(conn: sqlite3.Connection, address: str) -> str | None:
    """The title ``address`` was last listed with, or None."""
    return session_titles(conn, [address]).get(address)


def session_titles(conn: sqlite3.Connection, addresses: list[str]) -> dict[str, str]:
    """``{address: title it was last listed with}`` for those of ``addresses`` that have one:
    one query per 500 addresses, not one per address (a list of cards or agents)."""
    titles: dict[str, str] = {}
    unique = list(dict.fromkeys(addresses))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        marks = ", ".join("?" for _ in chunk)
        try:
            rows = conn.execute(f"SELECT address, title FROM session_titles WHERE address IN ({marks})", chunk).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # a database this plugin never opened (turned off): no titles known
                return {}
            raise
        for row in rows:
            titles.setdefault(str(row[0]), str(row[1]))  # the first row of an address, as fetchone took it
    return titles


def _with_titles(conn: sqlite3.Connection, expression: str) -> str:
    """Widen the expression to the mail of sessions whose title matches it (unchanged in a
    database without the titles table: the search itself then says the index is missing)."""
    try:
        addresses = [r[0] for r in conn.execute(
            "SELECT address FROM session_titles WHERE session_titles MATCH ? LIMIT ?",
            ("{title} : (" + expression + ")", MAX_TITLE_ADDRESSES),
        )]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return expression
        raise
    if not addresses:
        return expression
    alternatives = " OR ".join("{from_addr to_addr recipient} : " + _phrase(a) for a in addresses)
    return f"({expression}) OR {alternatives}"


def split_snippet(snippet: str) -> list[tuple[str, bool]]:
    """Cut a raw FTS5 snippet into ``(text, is_hit)`` pieces (text still raw, unescaped)."""
    pieces: list[tuple[str, bool]] = []
    for i, chunk in enumerate(snippet.split(_MARK_OPEN)):
        if i == 0:
            if chunk:
                pieces.append((chunk, False))
            continue
        hit, _, rest = chunk.partition(_MARK_CLOSE)
        if hit:
            pieces.append((hit, True))
        if rest:
            pieces.append((rest, False))
    return pieces


def escaped_snippet(pieces: list[tuple[str, bool]]) -> str:
    """The snippet for a model or a script: every piece escaped like envelope text (so it
    holds no ``<``, ``>`` or invisible character), hits wrapped in ``<hit>…</hit>``."""
    return "".join(HIT_OPEN + escape_text(t) + HIT_CLOSE if hit else escape_text(t) for t, hit in pieces)


def encode_cursor(rowid: int) -> str:
    """The opaque cursor of the page after ``rowid``."""
    return f"r{rowid}"


def decode_cursor(cursor: str) -> int:
    """The rowid a cursor continues below; ``invalid_arguments`` for one this module did not make."""
    match = _CURSOR_RE.match(cursor)
    if match is None:
        raise invalid_arguments([{"path": "cursor", "rule": "format", "expected": "the nextCursor of an earlier search"}])
    return int(match.group(1))


def search(
    mailbox: Mailbox, visibility: Visibility, query: str, *, from_address: str | None = None,
    to_address: str | None = None, since_ms: int | None = None, until_ms: int | None = None,
    status: str | None = None, limit: int = 20, cursor: str | None = None,
) -> dict[str, Any]:
    """Search the messages ``visibility`` allows, newest first.

    :param query: see :func:`fts_query`.
    :param from_address: only messages sent by this address.
    :param to_address: only messages addressed or handed to this address.
    :param since_ms / until_ms: only messages stored at or after / before these epoch ms.
    :param status: one of :data:`STATUSES` (computed, like every status, on read).
    :param limit: results per page (1..100).
    :param cursor: ``nextCursor`` of the previous page.
    :returns: ``{"results": [{id, from, to, addressedTo, sentAt, anticipation, inReplyTo,
        delivery, status, snippet, pieces}], "nextCursor": str | None}``; ``pieces`` are the
        raw snippet parts ``[(text, is_hit)]`` for callers that escape for another medium
        (a web page) and must be removed before the result reaches a model.
    :raises AgentLinkError: ``invalid_arguments`` for an unreadable query or cursor;
        ``unsupported`` in a database without the index (the plugin never opened it: a caller
        such as the web page where the plugin is turned off).
    """
    expression = _with_titles(mailbox.store.conn, fts_query(query))
    where, params = visibility.sql("m")
    clauses = ["message_fts MATCH ?", where]
    values: list[Any] = [expression, *params]
    for clause, value in (("m.from_addr = ?", from_address), ("(m.to_addr = ? OR m.recipient = ?)", to_address),
                          ("m.sent_at >= ?", since_ms), ("m.sent_at < ?", until_ms)):
        if value is not None:
            clauses.append(clause)
            values += [value] * clause.count("?")
    if status in RESOLVED_KIND:
        clauses.append("EXISTS (SELECT 1 FROM resolutions r WHERE r.message_id = m.id AND r.kind = ?)")
        values.append(RESOLVED_KIND[status])
    elif status is not None:
        clauses.append("m.anticipation != 'fyi' AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.message_id = m.id)")
    below = decode_cursor(cursor) if cursor else None
    sql = (
        "SELECT m.*, message_fts.rowid AS rid, snippet(message_fts, 0, ?, ?, '…', ?) AS snip"
        " FROM message_fts JOIN messages m ON m.rowid = message_fts.rowid"
        f" WHERE {' AND '.join(clauses)} AND message_fts.rowid < ?"
        " ORDER BY message_fts.rowid DESC LIMIT ?"
    )
    results: list[dict[str, Any]] = []
    last_rowid: int | None = None
    batch = limit + 1 if status is None else max(4 * limit, 50)
    now = now_ms()
    while len(results) <= limit:
        try:
            rows = mailbox.store.conn.execute(
                sql, [_MARK_OPEN, _MARK_CLOSE, SNIPPET_TOKENS, *values, below if below is not None else 2**63 - 1, batch]
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # a caller that searches where this plugin is turned off
                raise AgentLinkError("unsupported", "Search is off here: the search plugin is not loaded.",
                                     {"capability": "search"},
                                     hint="Install agent-link-search (plugins/search), or remove it from "
                                          "AGENT_LINK_DISABLE_PLUGINS.") from None
            if "fts5" in str(exc) or "no such column" in str(exc) or "syntax" in str(exc):
                raise _query_error("fts", "it uses a form the index cannot evaluate.") from None
            raise
        for row, state in zip(rows, mailbox.states(rows, now), strict=True):  # one batch of queries per page of rows
            if status is not None and state.status != status:
                continue
            if len(results) == limit:
                results.append({})  # one more exists: enough to know a next page is there
                break
            pieces = split_snippet(row["snip"] or "")
            results.append({
                "id": row["id"], "from": row["from_addr"], "to": row["recipient"], "addressedTo": row["to_addr"],
                "sentAt": iso(row["sent_at"]), "anticipation": row["anticipation"], "inReplyTo": row["reply_to"],
                "delivery": state.delivery, "status": state.status, "snippet": escaped_snippet(pieces),
                "pieces": pieces,
            })
            last_rowid = row["rid"]
        if len(rows) < batch:
            break
        below = rows[-1]["rid"]
    more = len(results) > limit
    return {"results": results[:limit], "nextCursor": encode_cursor(last_rowid) if more and last_rowid else None}


def search_messages(
    app: App, caller: Caller, query: str, *, from_address: str | None = None, to_address: str | None = None,
    since: str | None = None, until: str | None = None, status: str | None = None, limit: int = 20,
    cursor: str | None = None, keep_pieces: bool = False,
) -> dict[str, Any]:
    """Full-text search over the mail ``caller`` sent or received (every message with
    ``AGENT_LINK_INSPECT_ALL``), newest first: what the tool and the ``search`` command answer.

    :param keep_pieces: keep each result's raw ``pieces`` (``[(text, is_hit)]``), for a
        caller that shows the snippet in another medium than escaped text (a terminal).
    :param since / until: ISO 8601 times with a zone (``until`` excluded).
    :returns: ``{"query", "scope": "caller" | "all", "callerAddress", "results", "nextCursor"}``;
        each result carries an escaped ``snippet``, never the body.
    :raises AgentLinkError: ``no_current_session`` for an unidentified caller (without
        the setting), ``invalid_arguments`` for a bad query, time or cursor.
    """
    everything = bool(app.config.get("AGENT_LINK_INSPECT_ALL"))
    if not everything:
        app.require_caller(caller)
    visibility = app.mailbox.visible_to(caller.address, all_mail=everything)
    found = search(
        app.mailbox, visibility, query, from_address=from_address, to_address=to_address,
        since_ms=parse_iso_ms(since, "since") if since else None, until_ms=parse_iso_ms(until, "until") if until else None,
        status=status, limit=limit, cursor=cursor,
    )
    for result in found["results"] if not keep_pieces else ():
        result.pop("pieces")
    return {"query": query, "scope": "all" if everything else "caller",
            "callerAddress": caller.address if caller.known else None, **found}
