"""The ``filehost`` harness: a toy host, to show what a harness promises (docs/plugins.md §5).

* identity: a process runs inside session ``ID`` when ``FILEHOST_SESSION=ID`` is in its
  environment (source ``env``), or a tool call's ``_meta`` carries ``filehostSession``
  (source ``runtime_context``);
* listing: ``<dir>/sessions.json``; a file that cannot be read makes an incomplete listing
  with a provider report, never an empty one;
* delivery: the envelope is appended to ``<dir>/inbox/<ID>.txt``; the write, flushed to
  disk, is the evidence. A message already appended is never appended again.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Delivery, Harness, SessionListing
from agent_link_core.model import Caller, Session
from agent_link_core.store import now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App

NAME = "filehost"
VIA = "filehost-file"
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def host_dir(app: App) -> Path:
    """``AGENT_LINK_FILEHOST_DIR``, else ``<state dir>/filehost``."""
    explicit = app.config.get("AGENT_LINK_FILEHOST_DIR")
    return Path(explicit) if explicit else Path(app.config.state_dir) / NAME


def read_sessions(root: Path) -> list[dict[str, Any]]:
    """The entries of ``<root>/sessions.json`` (``[]`` when there is no file).

    :raises ValueError: when the file is not ``{"sessions": [...]}`` JSON.
    :raises OSError: when it cannot be read.
    """
    path = root / "sessions.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), list):
        raise ValueError("sessions.json is not {\"sessions\": [...]}")
    return [s for s in data["sessions"] if isinstance(s, dict) and SESSION_ID_RE.match(str(s.get("id", "")))]


def write_sessions(root: Path, sessions: list[dict[str, Any]]) -> None:
    """Replace ``<root>/sessions.json`` atomically (a reader never sees half a file)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = root / "sessions.json.tmp"
    tmp.write_text(json.dumps({"sessions": sessions}, indent=2), encoding="utf-8")
    os.replace(tmp, root / "sessions.json")


class FileHostHarness(Harness):
    """Sessions from a JSON file; mail appended to a file per session."""

    name = NAME
    source_kinds = ("file",)

    def identify_caller(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> Caller | None:
        from_meta = meta.get("filehostSession") if meta else None
        if isinstance(from_meta, str) and SESSION_ID_RE.match(from_meta):
            return Caller(f"{NAME}:{from_meta}", "runtime_context", NAME)
        from_env = (env.get("FILEHOST_SESSION") or "").strip()
        if SESSION_ID_RE.match(from_env):
            return Caller(f"{NAME}:{from_env}", "env", NAME)
        return None

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        root = host_dir(self.app)
        try:
            entries = await asyncio.to_thread(read_sessions, root)
        except (OSError, ValueError) as exc:
            return SessionListing(provider={"available": False, "reason": "sessions_file_unreadable",
                                            "error": type(exc).__name__}, complete=False)
        sessions = [self._session(e) for e in entries]
        sessions = [s for s in sessions if include_archived or not s.archived]
        sessions.sort(key=lambda s: -(s.last_activity_ms or 0))
        return SessionListing(sessions[:limit], {"available": True, "reason": None, "source": "sessions.json"},
                              complete=len(sessions) <= limit)

    async def get_session(self, session_id: str) -> Session | None:
        listing = await self.list_sessions(include_archived=True, limit=100_000)
        return next((s for s in listing.sessions if s.id == session_id), None)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Mapping[str, Any]) -> Delivery:
        session = message["recipient"].split(":", 1)[1]
        found = await self.get_session(session)
        if found is None:
            raise AgentLinkError("not_found", f"No filehost session {session} is listed.", {"query": message["recipient"]})
        if found.archived:
            raise AgentLinkError("archived", f"{message['recipient']} is archived.", {"address": message["recipient"]})
        done = self.app.store.conn.execute(
            "SELECT bytes FROM filehost_deliveries WHERE message_id = ?", (message["id"],)).fetchone()
        if done is not None:  # appended before: the evidence stands, nothing is written twice
            return Delivery(delivered=True, via=VIA, state="appended", evidence={"bytes": done["bytes"], "again": True})
        size = await asyncio.to_thread(self._append, session, envelope)
        with self.app.store.write() as conn:
            conn.execute("INSERT OR IGNORE INTO filehost_deliveries (message_id, session, at, bytes) VALUES (?, ?, ?, ?)",
                         (message["id"], session, now_ms(), size))
        return Delivery(delivered=True, via=VIA, state="appended", evidence={"bytes": size}, fields={"inboxFile": f"{session}.txt"})

    def _append(self, session: str, envelope: str) -> int:
        inbox = host_dir(self.app) / "inbox"
        inbox.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = (envelope + "\n").encode("utf-8")
        fd = os.open(inbox / f"{session}.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return len(data)

    def health(self) -> dict[str, Any]:
        return {"dir": str(host_dir(self.app))}

    @staticmethod
    def _session(entry: dict[str, Any]) -> Session:
        sid = str(entry["id"])
        last = entry.get("lastActivityMs")
        return Session(
            address=f"{NAME}:{sid}", harness=NAME, id=sid, title=entry.get("title") if isinstance(entry.get("title"), str) else None,
            cwd=entry.get("cwd") if isinstance(entry.get("cwd"), str) else None, archived=bool(entry.get("archived")),
            last_activity_ms=last if isinstance(last, int) else None, surface=("file",),
            receive={"push": VIA, "nudge": None, "pull": True},
        )
