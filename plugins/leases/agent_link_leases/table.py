"""The ``leases`` table: claims, releases and listings, each one transaction.

A lease row is one normalised pattern held by one address under one project root, exclusive
or shared, with a reason and an expiry (epoch ms). Claiming a pattern its holder already
holds renews it (new expiry, exclusivity and reason). A lease ends when released, when it
expires (expired rows are ignored by every read and deleted by the next write), or when a
clashing claim finds its holder gone (:mod:`agent_link_leases.liveness`).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.mailbox import iso
from agent_link_core.store import Store

from agent_link_leases.patterns import (
    MAX_PATTERN_BYTES,
    MAX_SEGMENT_BYTES,
    Pattern,
    PatternError,
    case_insensitive,
    covers_project,
    normalise,
    overlap,
    parse,
)

from agent_link_leases.schema import (  # noqa: F401 - re-exported for the plugin's other modules
    ADMIN_SETTING,
    DEFAULT_TTL_MS,
    MAX_REASON_CHARS,
    MAX_TTL_MS,
    MIGRATIONS,
    OWNER,
    TTL_SETTING,
)


@dataclass(frozen=True)
class Project:
    """A project root: ``path`` resolved, ``fold`` when its file system ignores case."""

    path: str
    fold: bool


def git_top_level(cwd: str) -> str | None:
    """The nearest directory at or above ``cwd`` holding ``.git`` (a directory, or the file of a
    worktree or submodule), as ``git rev-parse --show-toplevel`` finds it; None outside a repo."""
    here = os.path.realpath(cwd)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def project(given: str | None, cwd: str) -> Project:
    """The project root a call is about: ``given`` (absolute, an existing directory), else the
    git top level of ``cwd``.

    :raises AgentLinkError: ``invalid_arguments`` (path ``projectRoot``) for a relative or
        missing directory, or when ``cwd`` is in no git repository and none was given.
    """
    if given is None:
        top = git_top_level(cwd)
        if top is None:
            raise invalid_arguments(
                [{"path": "projectRoot", "rule": "required", "expected": "an absolute project root (the caller's directory is in no git repository)"}],
                f"{cwd} is not inside a git repository, so there is no default project root; pass projectRoot.")
        return Project(top, case_insensitive(top))
    if not os.path.isabs(given) or not os.path.isdir(given):
        raise invalid_arguments([{"path": "projectRoot", "rule": "directory", "expected": "an absolute path of an existing directory"}],
                                f"projectRoot {given!r} is not an absolute path of an existing directory.")
    path = os.path.realpath(given)
    return Project(path, case_insensitive(path))


#: what a pattern refused for each :class:`PatternError` reason should be instead
EXPECTED = {
    "empty": "a file, directory or glob (not empty)", "nul": "a path without NUL characters",
    "dotdot_after_wildcard": "no '..' after a wildcard", "unclosed_class": "every '[' closed by ']'",
    "unsupported_class": "the characters listed in [...] (no [:alpha:] classes)", "trailing_escape": "no '\\' at the end",
    "too_long": f"a path of at most {MAX_PATTERN_BYTES} bytes", "segment_too_long": f"file and directory names of at most {MAX_SEGMENT_BYTES} bytes",
}


def check_reason(reason: str | None, argument: str = "reason") -> None:
    """Refuse a lease reason over :data:`MAX_REASON_CHARS` characters (it is shown wherever
    the lease is: conflicts, listings, the web page).

    :raises AgentLinkError: ``invalid_arguments`` (path ``argument``, rule ``maxLength``).
    """
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise invalid_arguments([{"path": argument, "rule": "maxLength", "expected": f"at most {MAX_REASON_CHARS} characters"}],
                                f"The reason is {len(reason)} characters long; give at most {MAX_REASON_CHARS}.")


def project_warnings(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Warnings for a claim's result (:func:`claim`): ``lease_covers_project`` for each lease
    that covers the whole project (``.``, ``**``...), which holds every file of it from
    everyone else: ``{code, message, details: {path, projectRoot, exclusive}}``."""
    found = []
    for lease in out["leases"]:
        if covers_project(parse(lease["path"])):  # "." and wildcards always cover what is below them
            whom = "any other session" if lease["exclusive"] else "an exclusive lease by anyone else"
            found.append({"code": "lease_covers_project", "details": {"path": lease["path"], "projectRoot": out["projectRoot"],
                                                                     "exclusive": lease["exclusive"]},
                          "message": f"Your lease of {lease['path']} covers the whole project {out['projectRoot']}: it keeps {whom}"
                                     " from every file in it until you release it. Lease only the files you edit."})
    return found


def patterns(root: Project, typed: list[str], argument: str = "paths") -> list[Pattern]:
    """Normalise each typed pattern (:func:`agent_link_leases.patterns.normalise`).

    :raises AgentLinkError: ``invalid_arguments`` naming every bad one (``paths.<i>``, rule
        the :class:`PatternError` reason, ``expected`` what it should be), its message the
        patterns' faults.
    """
    out: list[Pattern] = []
    errors: list[dict[str, Any]] = []
    faults: list[str] = []
    for i, text in enumerate(typed):
        try:
            out.append(normalise(text, root.path, fold=root.fold))
        except PatternError as exc:
            where = f"{argument}.{i}" if argument == "paths" else argument
            expected = EXPECTED.get(exc.reason, f"a path inside the project root {root.path}")
            errors.append({"path": where, "rule": exc.reason, "expected": expected})
            faults.append(exc.message)
    if errors:
        raise invalid_arguments(errors, f"Bad path{'s' if len(faults) > 1 else ''}: {' '.join(faults)}")
    return out


def anchor(pattern: Pattern) -> str:
    """The names of ``pattern``'s leading literal segments, ``/``-joined ("" for none).

    A path matching two patterns starts with both anchors, so of two overlapping patterns one
    anchor is a segment prefix of the other: a conflict check reads only the leases whose
    anchor is a prefix of the claim's or lies below it (two index lookups per depth), not
    every lease under the root.
    """
    names: list[str] = []
    for segment in pattern.segments:
        if isinstance(segment, str) or any(isinstance(t, str) or len(t) != 1 or t[0][0] != t[0][1] for t in segment):
            break
        names.append("".join(chr(t[0][0]) for t in segment if not isinstance(t, str)))
    return "/".join(names)


def _candidates(conn: sqlite3.Connection, holder: str, root: Project, pattern: Pattern, now: int) -> list[sqlite3.Row]:
    """Others' active leases under ``root`` that may overlap ``pattern`` (by :func:`anchor`)."""
    mine = anchor(pattern)
    parts = mine.split("/") if mine else []
    prefixes = ["/".join(parts[:k]) for k in range(len(parts) + 1)]
    # Two indexed reads (an OR of both would make SQLite scan every lease of the root).
    where = "root = ? AND holder != ? AND expires_at > ?"
    rows = conn.execute(f"SELECT * FROM leases WHERE {where} AND anchor IN ({', '.join('?' for _ in prefixes)})",
                        (root.path, holder, now, *prefixes)).fetchall()
    below = ("anchor > ? AND anchor < ?", (mine + "/", mine + "0")) if mine else ("anchor != ''", ())  # "0" follows "/"
    return rows + conn.execute(f"SELECT * FROM leases WHERE {where} AND {below[0]}", (root.path, holder, now, *below[1])).fetchall()


def _row_pattern(row: sqlite3.Row) -> Pattern:
    return parse(row["pattern"], bool(row["fold"]), bool(row["below"]))


def view(row: sqlite3.Row, now: int) -> dict[str, Any]:
    """One lease as tools show it: ``{id, holder, projectRoot, path, exclusive, reason,
    createdAt, expiresAt (ISO 8601), expiresInMs, untilResolved, claimKey}`` (``untilResolved``:
    the message whose resolution ends it, a worker's task, or None; ``claimKey``: what another
    plugin claimed it for, ``role:<name>`` or a worker's task message id, or None)."""
    return {
        "id": row["id"], "holder": row["holder"], "projectRoot": row["root"], "path": row["pattern"],
        "exclusive": bool(row["exclusive"]), "reason": row["reason"], "createdAt": iso(row["created_at"]),
        "expiresAt": iso(row["expires_at"]), "expiresInMs": max(0, row["expires_at"] - now), "untilResolved": row["until_resolved"],
        "claimKey": row["claim_key"],
    }


def conflicts(conn: sqlite3.Connection, holder: str, root: Project, wanted: list[tuple[str, Pattern]],
              exclusive: bool, now: int) -> list[dict[str, Any]]:
    """Others' active leases under ``root`` that clash with ``wanted`` (typed text, pattern):
    overlapping, and one side or both exclusive. One entry per holder, reason and expiry:
    ``{holder, paths, exclusive, reason, expiresAt, requested, message}``, ``message`` a text
    the claimant can send the holder to ask for them."""
    found: dict[int, sqlite3.Row] = {}
    for _, pattern in wanted:
        found.update((r["id"], r) for r in _candidates(conn, holder, root, pattern, now))
    rows = [found[i] for i in sorted(found)]
    grouped: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        if not (exclusive or row["exclusive"]):
            continue
        held = _row_pattern(row)
        hits = [typed for typed, pattern in wanted if overlap(pattern, held)]
        if not hits:
            continue
        key = (row["holder"], bool(row["exclusive"]), row["reason"], row["expires_at"])
        entry = grouped.setdefault(key, {
            "holder": row["holder"], "paths": [], "exclusive": bool(row["exclusive"]), "reason": row["reason"],
            "expiresAt": iso(row["expires_at"]), "requested": [],
        })
        entry["paths"].append(row["pattern"])
        entry["requested"].extend(h for h in hits if h not in entry["requested"])
    for entry in grouped.values():
        entry["message"] = (f"{holder} needs {', '.join(entry['requested'])} under {root.path}, which overlaps your lease of "
                            f"{', '.join(entry['paths'])}. Could you call release_paths for them when you are done, and tell me?")
    return list(grouped.values())


def claim(store: Store, holder: str, root: Project, typed: list[str], *, exclusive: bool, reason: str | None,
          ttl_ms: int, now: int, ended: dict[str, str] | None = None, until_resolved: str | None = None,
          key: str | None = None) -> dict[str, Any]:
    """Claim (or renew) every typed pattern for ``holder``, or none of them.

    :param ttl_ms: time to live from ``now`` (ms).
    :param reason: why; a renewal without one keeps the lease's reason.
    :param until_resolved: a message id whose resolution ends these leases (:func:`end_with_message`).
        A renewal without one keeps the lease's, and so does it keep its ``key``.
    :param key: what the claim is for (``role:<name>``, a task message id): the leases stored
        under it before, whoever holds them, are replaced by this claim in its transaction
        (those it does not renew end; a refused claim changes nothing), and
        :func:`release_key` ends them.
    :param ended: ``{holder: why}`` of holders known gone
        (:func:`agent_link_leases.liveness.gone_holders`): all their leases end first, in the
        same transaction (nothing ends when the claim is refused).
    :returns: ``{projectRoot, leases: [view], renewed: [path], ended: [{holder, why, paths}]}``
        (``renewed``: patterns the holder already held, now extended; ``ended``: the leases of
        gone holders this claim ended).
    :raises AgentLinkError: ``invalid_arguments`` for bad patterns (:func:`patterns`);
        ``lease_conflict`` with ``details.conflicts`` (:func:`conflicts`) when any overlaps
        another's lease, and then nothing is stored.
    """
    # one entry per stored pattern: "src" and "./src/" name one lease
    unique: dict[str, tuple[str, Pattern]] = {}
    for text, pattern in zip(typed, patterns(root, typed), strict=True):
        unique.setdefault(pattern.key, (text, pattern))
    wanted = list(unique.values())
    expires = now + ttl_ms
    with store.write() as conn:
        if key is not None:  # what was claimed under the key makes way (rolled back with a refusal)
            keep = [p.key for _, p in wanted]
            conn.execute(f"DELETE FROM leases WHERE claim_key = ? AND NOT (holder = ? AND root = ? AND pattern_key IN"
                         f" ({', '.join('?' for _ in keep)}))", (key, holder, root.path, *keep))
        gone: list[dict[str, Any]] = []
        for who, why in (ended or {}).items():
            rows = conn.execute("SELECT pattern FROM leases WHERE holder = ? AND expires_at > ? ORDER BY id", (who, now)).fetchall()
            if rows and who != holder:
                conn.execute("DELETE FROM leases WHERE holder = ?", (who,))
                gone.append({"holder": who, "why": why, "paths": [r["pattern"] for r in rows]})
        clashes = conflicts(conn, holder, root, wanted, exclusive, now)
        if clashes:
            raise _conflict_error(clashes)
        conn.execute("DELETE FROM leases WHERE expires_at <= ?", (now,))
        renewed: list[str] = []
        ids: list[int] = []
        for _, pattern in wanted:
            old = conn.execute("SELECT id FROM leases WHERE holder = ? AND root = ? AND pattern_key = ?",
                               (holder, root.path, pattern.key)).fetchone()
            if old is not None:
                renewed.append(pattern.text)
                conn.execute("UPDATE leases SET pattern = ?, below = ?, exclusive = ?, reason = COALESCE(?, reason), expires_at = ?,"
                             " until_resolved = COALESCE(?, until_resolved), claim_key = COALESCE(?, claim_key) WHERE id = ?",
                             (pattern.text, int(pattern.below), int(exclusive), reason, expires, until_resolved, key, old["id"]))
                ids.append(old["id"])
            else:
                cur = conn.execute(
                    "INSERT INTO leases (holder, root, pattern, pattern_key, fold, below, anchor, exclusive, reason,"
                    " created_at, expires_at, until_resolved, claim_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (holder, root.path, pattern.text, pattern.key, int(pattern.fold), int(pattern.below), anchor(pattern),
                     int(exclusive), reason, now, expires, until_resolved, key))
                ids.append(int(cur.lastrowid or 0))
        rows = [conn.execute("SELECT * FROM leases WHERE id = ?", (i,)).fetchone() for i in dict.fromkeys(ids)]
    return {"projectRoot": root.path, "leases": [view(r, now) for r in rows], "renewed": renewed, "ended": gone}


def _conflict_error(clashes: list[dict[str, Any]]) -> AgentLinkError:
    names = sorted({c["holder"] for c in clashes})
    return AgentLinkError(
        "lease_conflict", f"Nothing was leased: {', '.join(names)} hold{'s' if len(names) == 1 else ''} overlapping paths.",
        {"conflicts": clashes},
        hint="Send each holder its conflicts[].message (message_agent), or claim paths nobody holds.")


def end_with_message(conn: sqlite3.Connection, message_id: str) -> int:
    """Delete the leases claimed until ``message_id`` is resolved (inside the resolution's
    transaction); the number deleted."""
    return conn.execute("DELETE FROM leases WHERE until_resolved = ?", (message_id,)).rowcount


def release_key(store: Store, key: str, now: int) -> dict[str, Any]:
    """End every lease claimed under ``key`` (:func:`claim`), whoever holds it.

    :returns: ``{released: [view]}`` (the active ones that ended).
    """
    with store.write() as conn:
        rows = conn.execute("SELECT * FROM leases WHERE claim_key = ? AND expires_at > ? ORDER BY id", (key, now)).fetchall()
        conn.execute("DELETE FROM leases WHERE claim_key = ?", (key,))
    return {"released": [view(r, now) for r in rows]}


def release(store: Store, holder: str, root: Project | None, typed: list[str] | None, now: int) -> dict[str, Any]:
    """Release ``holder``'s leases: those of the typed patterns under ``root``, or all of them
    (every root) when ``typed`` is None. Others' leases are never released.

    :returns: ``{released: [view], notHeld: [typed], heldByOthers: [{path, holder, paths,
        exclusive, expiresAt}]}``: ``notHeld`` the typed patterns ``holder`` held no lease of;
        ``heldByOthers`` one entry per such pattern and other holder whose active leases
        overlap it (``path`` as typed, ``paths`` their leased patterns).
    :raises AgentLinkError: ``invalid_arguments`` for bad patterns.
    """
    with store.write() as conn:
        if typed is None or root is None:
            rows = conn.execute("SELECT * FROM leases WHERE holder = ? AND expires_at > ? ORDER BY id", (holder, now)).fetchall()
            conn.execute("DELETE FROM leases WHERE holder = ?", (holder,))
            return {"released": [view(r, now) for r in rows], "notHeld": [], "heldByOthers": []}
        released: list[sqlite3.Row] = []
        not_held: list[str] = []
        others: list[dict[str, Any]] = []
        for text, pattern in zip(typed, patterns(root, typed), strict=True):
            row = conn.execute("SELECT * FROM leases WHERE holder = ? AND root = ? AND pattern_key = ? AND expires_at > ?",
                               (holder, root.path, pattern.key, now)).fetchone()
            if row is None:
                not_held.append(text)
                # shared or exclusive alike: whoever holds it, it is not the caller's to release
                others.extend({"path": text, "holder": c["holder"], "paths": c["paths"], "exclusive": c["exclusive"],
                               "expiresAt": c["expiresAt"]} for c in conflicts(conn, holder, root, [(text, pattern)], True, now))
                continue
            conn.execute("DELETE FROM leases WHERE id = ?", (row["id"],))
            released.append(row)
        conn.execute("DELETE FROM leases WHERE expires_at <= ?", (now,))
    return {"released": [view(r, now) for r in released], "notHeld": not_held, "heldByOthers": others}


def release_by_id(store: Store, lease_id: int, now: int) -> dict[str, Any] | None:
    """End one active lease by its id, whoever holds it (a person ending a stale one).

    :returns: the lease as it was (:func:`view`), or None when no active lease has that id.
    """
    with store.write() as conn:
        row = conn.execute("SELECT * FROM leases WHERE id = ? AND expires_at > ?", (lease_id, now)).fetchone()
        if row is None:
            return None
        conn.execute("DELETE FROM leases WHERE id = ?", (lease_id,))
    return view(row, now)


def active(store: Store, now: int, *, root: Project | None = None, path: str | None = None,
           holder: str | None = None) -> list[dict[str, Any]]:
    """Active leases, oldest first: under ``root`` when given, overlapping ``path`` (a pattern
    normalised against ``root``, which it then needs), of ``holder`` when given.

    :raises AgentLinkError: ``invalid_arguments`` (path ``path``) for a bad pattern.
    """
    sql = "SELECT * FROM leases WHERE expires_at > ?"
    params: list[object] = [now]
    if root is not None:
        sql, params = sql + " AND root = ?", [*params, root.path]
    if holder is not None:
        sql, params = sql + " AND holder = ?", [*params, holder]
    rows = store.conn.execute(sql + " ORDER BY id", params).fetchall()
    if path is not None and root is not None:
        wanted = patterns(root, [path], "path")[0]
        rows = [r for r in rows if overlap(wanted, _row_pattern(r))]
    return [view(r, now) for r in rows]
