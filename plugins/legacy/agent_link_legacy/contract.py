"""The original Agent Link's files: the importers' contract.

The original kept its state as files in its state directory (``AGENT_LINK_STATE_DIR``, else
``~/.agent-link``, the same directory agent-link uses): a JSONL mailbox, receipts, the role
table and a fork log, plus a few older paths. docs/legacy.md describes every format.

Each kind is imported by a :class:`LegacyImporter` that a plugin contributes through this plugin's
``agent_link_register_legacy_importers`` hook (:mod:`agent_link_legacy.hookspecs`): this plugin imports the mailbox, the
receipts, roles and forks plugins import their own records, and a harness plugin may add the
older paths of its host and say what its host's legacy session ids are as addresses
(:meth:`LegacyImporter.legacy_address`). Those plugins implement it as an optional hook, so that they load
without this one; the record type is this plugin's, checked here (:func:`check_importer`), and
their importer modules are imported only when this plugin asks for them.
``agent-link import-legacy`` (:func:`agent_link_legacy.engine.import_legacy`) drives them;
:mod:`agent_link_legacy.state` is health's ``legacy`` section.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_link_core.addresses import EXTERNAL, ULID_RE, is_address, is_harness_name
from agent_link_core.boundary import Refused

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

#: bad lines named in a report, per importer (the count covers all of them)
MAX_BAD_LINES = 5
#: the original's longest mailbox line; longer lines are unreadable
MAX_LINE_BYTES = 512 * 1024
RUNTIME_SOURCES = ("current_session", "env", "runtime_context")
SENDER_SOURCES = (*RUNTIME_SOURCES, "fallback")
RESOLUTION_KINDS = ("reply", "decline", "done")
HARNESS_RE_TEXT = r"[a-z][a-z0-9-]{0,31}"
ID_CHARS_RE_TEXT = r"[A-Za-z0-9_.-]{1,128}"


class LegacyOutcome:
    """What one importer did: counts per record, the files it read and its first bad lines.

    :param name: the importer's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.imported = 0
        self.present = 0
        self.unreadable = 0
        self.bad_lines: list[dict[str, Any]] = []
        self.flagged: list[dict[str, Any]] = []
        self.files: list[str] = []
        self.lines: dict[str, int] = {}  # non-blank lines read per file (read_jsonl)
        self.bad_in: dict[str, int] = {}  # unreadable lines (or whole files) per file
        self.details: dict[str, int] = {}
        self.notes: list[str] = []
        self.error: str | None = None

    def bad(self, path: str, line: int | None, error: str) -> None:
        """Count one unreadable line (``line`` 1-based, None for a whole file) and keep the
        first :data:`MAX_BAD_LINES` with where they are."""
        self.unreadable += 1
        self.bad_in[path] = self.bad_in.get(path, 0) + 1
        if len(self.bad_lines) < MAX_BAD_LINES:
            self.bad_lines.append({"file": path, "line": line, "error": error[:200]})

    def flag(self, path: str, line: int | None, key: str, why: str) -> None:
        """Count one record that was imported but is not whole to a reader (``details[key]``)
        and keep the first :data:`MAX_BAD_LINES` with where they are and ``why``."""
        self.count(key)
        if len(self.flagged) < MAX_BAD_LINES:
            self.flagged.append({"file": path, "line": line, "note": why[:200]})

    def nothing_read(self, path: str) -> bool:
        """Whether every line of ``path`` (or the whole file) was unreadable: nothing of it
        was imported, so it is not recorded as imported."""
        bad = self.bad_in.get(path, 0)
        return bad > 0 and bad >= self.lines.get(path, 0)

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to a named detail count (e.g. ``events``)."""
        self.details[key] = self.details.get(key, 0) + n

    def as_dict(self) -> dict[str, Any]:
        """The JSON view: ``{name, ok, imported, alreadyPresent, unreadable, badLines, files,
        flagged?, details?, notes?, error?}`` (``badLines``/``flagged``: the first
        :data:`MAX_BAD_LINES` of each)."""
        out: dict[str, Any] = {
            "name": self.name, "ok": self.error is None, "imported": self.imported, "alreadyPresent": self.present,
            "unreadable": self.unreadable, "badLines": self.bad_lines, "files": self.files,
        }
        if self.flagged:
            out["flagged"] = list(self.flagged)
        if self.details:
            out["details"] = dict(self.details)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.error is not None:
            out["error"] = self.error
        return out


class LegacyImporter:
    """One kind of the original's state, imported into the database by the plugin owning it.

    Subclass it and register an instance from ``agent_link_register_legacy_importers``.

    :attr name: the kind, lower case (``mailbox``, ``receipts``, ...): names it in reports.
    :attr order: importers run by ascending order, then name; files of older layouts the
        original read first come first (the first copy of a record wins).
    """

    name: str = ""
    order: int = 50

    def paths(self, ctx: LegacyContext) -> list[str]:
        """Absolute paths of the files this importer reads, existing or not (health lists
        the existing ones). Only :meth:`run` reads them."""
        return []

    def own_paths(self, ctx: LegacyContext) -> list[str]:
        """The paths among :meth:`paths` that agent-link itself writes too (a file of the same
        format it keeps where the original did, a log it appends to). They change without the
        original, so health never counts them as waiting to be imported."""
        return []

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        """Import the records of the existing :meth:`paths`, writing through ``ctx.conn``.

        Count each record in ``outcome`` (imported, present, bad lines); a record whose id is
        stored already is left as it is. Raise only for a failure of the whole importer: its
        writes are then undone, the others' kept. Never write, move or delete the files.
        """

    def legacy_address(self, session_id: str, kind: str | None) -> str | None:
        """The address a session id stored by the original stands for, or None when this
        importer does not know the form (a harness plugin answers for its host's ids).

        :param session_id: an id as the original stored it (an address, or a bare id).
        :param kind: the original's ``*_session_kind`` beside it, or None.
        """
        return None


@dataclass
class LegacyContext:
    """What an importer works with.

    :param app: the App (settings, store, hooks).
    :param source_dir: the directory the original kept its files in (absolute).
    :param conn: the connection inside the import's write transaction.
    :param importers: every importer, for :meth:`address`.
    :param dry_run: nothing may be kept: the database writes are rolled back by the driver,
        but an importer that writes files (a copy into the state dir) must skip that itself.
    """

    app: App
    source_dir: str
    conn: sqlite3.Connection
    importers: list[LegacyImporter] = field(default_factory=list)
    dry_run: bool = False
    #: message ids stored by this run (any importer): later files' events apply to them
    new_messages: set[str] = field(default_factory=set)

    @property
    def env(self) -> dict[str, str]:
        """The process environment the App was built with."""
        return dict(self.app.env)

    @property
    def home(self) -> str:
        """The user's home directory (``HOME`` of the App's environment)."""
        return self.app.env.get("HOME") or os.path.expanduser("~")

    def address(self, session_id: object, kind: object = None) -> str | None:
        """The address an id stored by the original stands for, or None when nobody knows it.

        An address is kept; ``external`` stays ``external``; the importers are asked next
        (:meth:`LegacyImporter.legacy_address`); a bare id with a harness name as ``kind``
        becomes ``<kind>:<id>``.
        """
        if not isinstance(session_id, str) or not session_id:
            return None
        if session_id == EXTERNAL or is_address(session_id):
            return session_id
        kind_text = kind if isinstance(kind, str) and kind else None
        for importer in self.importers:
            try:
                found = importer.legacy_address(session_id, kind_text)
            except Exception:  # one importer's bad answer must not stop the others
                found = None
            if found is not None and is_address(found):
                return found
        if kind_text == EXTERNAL:
            return EXTERNAL
        candidate = f"{kind_text}:{session_id}" if kind_text else None
        return candidate if candidate is not None and is_address(candidate) else None

    def read_jsonl(self, path: str, outcome: LegacyOutcome) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(line number, object)`` for every line of ``path`` holding a JSON object; blank
        lines are skipped, any other line is counted bad in ``outcome``.

        :raises OSError: when the file cannot be opened (the caller decides).
        """
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                outcome.lines[path] = outcome.lines.get(path, 0) + 1
                if len(raw) > MAX_LINE_BYTES:
                    outcome.bad(path, lineno, f"longer than {MAX_LINE_BYTES} bytes")
                    continue
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as exc:
                    outcome.bad(path, lineno, f"not JSON: {exc}")
                    continue
                except RecursionError:  # not a ValueError: one line must not end the whole import
                    outcome.bad(path, lineno, "not JSON: nested too deeply")
                    continue
                if not isinstance(obj, dict):
                    outcome.bad(path, lineno, f"a JSON {type(obj).__name__}, not an object")
                    continue
                if b"\\u" in raw:  # a JSON escape may hold a lone surrogate, which SQLite cannot store
                    obj = _sanitized(obj)
                yield lineno, obj

    def read_json(self, path: str, outcome: LegacyOutcome) -> dict[str, Any] | None:
        """The JSON object in ``path``, or None (counted bad) when it is not one."""
        try:
            with open(path, "rb") as fh:
                obj = json.loads(fh.read(8 * 1024 * 1024).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            outcome.bad(path, None, f"not readable as JSON: {exc}")
            return None
        except RecursionError:
            outcome.bad(path, None, "not readable as JSON: nested too deeply")
            return None
        if not isinstance(obj, dict):
            outcome.bad(path, None, f"a JSON {type(obj).__name__}, not an object")
            return None
        return obj


def _sanitized(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys included) replaced by U+FFFD."""
    from agent_link_core.envelope import sanitize_text

    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, list):
        return [_sanitized(v) for v in value]
    if isinstance(value, dict):
        return {sanitize_text(k): _sanitized(v) for k, v in value.items()}
    return value


def existing(paths: list[str]) -> list[str]:
    """The regular files among ``paths``, in order, each once."""
    seen: list[str] = []
    for path in paths:
        if path not in seen and os.path.isfile(path):
            seen.append(path)
    return seen


def ulid_upper(value: object) -> str | None:
    """``value`` as a ULID in upper case (ULIDs are case-insensitive; agent-link stores them
    upper case), or None when it is not one."""
    if not isinstance(value, str):
        return None
    upper = value.upper()
    return upper if ULID_RE.fullmatch(upper) else None


def check_importer(record: Any) -> None:
    """Refuse a registered importer that is not a :class:`LegacyImporter` with a lower-case
    name and an integer order (the plugin that registered it is then left out).

    :raises Refused: naming what is wrong and how to fix it.
    """
    if not isinstance(record, LegacyImporter):
        raise Refused(f"registered a {type(record).__name__}, not a LegacyImporter",
                      "Subclass agent_link_legacy.contract.LegacyImporter.")
    if not is_harness_name(record.name):
        raise Refused(f"registered a legacy importer named {record.name!r}",
                      "Importer names are 1-32 of a-z 0-9 -, starting with a letter.")
    if not isinstance(record.order, int) or isinstance(record.order, bool):
        raise Refused(f"legacy importer {record.name!r} has order {record.order!r}", "The order is an integer.")


def importers(app: App) -> list[tuple[str, LegacyImporter]]:
    """``[(plugin, importer)]`` of every accepted importer, in run order (the core's
    ``agent_link_register_legacy_importers`` hook, each record checked by :func:`check_importer`)."""
    found = app.hooks.collect("legacy importer", "agent_link_register_legacy_importers", check_importer)
    ordered = sorted(found.values(), key=lambda i: (i.order, i.name))
    return [(app.hooks.owner("legacy importer", i.name) or "?", i) for i in ordered]
