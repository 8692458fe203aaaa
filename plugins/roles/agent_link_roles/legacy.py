"""Importing the original's role files (``agent-link import-legacy``, docs/legacy.md).

* ``roles.json`` has the same format here and is read where it is: when the original's files
  are in this state dir there is nothing to move. From another directory (``--from``) it is
  copied in when this state dir has none (with the ``roles/<name>.md`` procedures this state
  dir lacks); a different table already here is left alone and reported.
* ``role-state.json`` (the original's own record) holds each procedure's version number and
  hash, and which holder saw which hash. A version whose file still has that hash becomes the
  role's recorded version (so numbering goes on from it); what a holder saw is recorded as
  shown, so the text is not sent to them again.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_link_legacy.contract import LegacyContext, LegacyImporter, LegacyOutcome
from agent_link_core.addresses import ROLE_NAME_RE
from agent_link_core.store import now_ms

from agent_link_roles.files import atomic_write
from agent_link_roles.procedures import PROCEDURES_DIR, procedure_path, read_procedure
from agent_link_roles.table import TABLE_FILE

STATE_FILE = "role-state.json"
SHOWN_BY_IMPORT = "legacy-import"  # role_procedure_shown.message_id of what the original showed


class RolesImporter(LegacyImporter):
    """The roles plugin's importer (name ``roles``)."""

    name = "roles"
    order = 50

    def paths(self, ctx: LegacyContext) -> list[str]:
        return [os.path.join(ctx.source_dir, TABLE_FILE), os.path.join(ctx.source_dir, STATE_FILE)]

    def own_paths(self, ctx: LegacyContext) -> list[str]:
        # this plugin keeps roles.json in the state dir itself (set_agent_role, an import's copy)
        return [os.path.join(ctx.app.config.state_dir, TABLE_FILE)]

    def run(self, ctx: LegacyContext, outcome: LegacyOutcome) -> None:
        table, state = (os.path.join(ctx.source_dir, n) for n in (TABLE_FILE, STATE_FILE))
        if os.path.isfile(table):
            self._table(ctx, table, outcome)
        if os.path.isfile(state):
            self._state(ctx, state, outcome)

    def _table(self, ctx: LegacyContext, path: str, outcome: LegacyOutcome) -> None:
        doc = ctx.read_json(path, outcome)
        if doc is None:
            return
        outcome.files.append(path)
        found = doc.get("roles")
        roles: dict[str, Any] = found if isinstance(found, dict) else {}
        here = Path(ctx.app.config.state_dir)
        mine = here / TABLE_FILE
        if os.path.realpath(path) == os.path.realpath(mine):
            outcome.present += len(roles)
            outcome.notes.append(f"{TABLE_FILE} is read where it is ({len(roles)} roles).")
            return
        with open(path, "rb") as fh:
            data = fh.read()
        if mine.exists():
            if mine.read_bytes() == data:
                outcome.present += len(roles)
            else:
                outcome.notes.append(f"{mine} differs from {path} and was left as it is; merge them by hand if needed.")
            return
        if not ctx.dry_run:
            atomic_write(mine, data, here)
            for name in roles:
                src = procedure_path(Path(ctx.source_dir), name)
                dst = procedure_path(here, name)
                if isinstance(name, str) and ROLE_NAME_RE.fullmatch(name) and src.is_file() and not src.is_symlink() and not dst.exists():
                    (here / PROCEDURES_DIR).mkdir(mode=0o700, exist_ok=True)
                    atomic_write(dst, src.read_bytes(), here)
        outcome.imported += len(roles)

    def _state(self, ctx: LegacyContext, path: str, outcome: LegacyOutcome) -> None:
        doc = ctx.read_json(path, outcome)
        if doc is None:
            return
        outcome.files.append(path)
        procedures = doc.get("procedures") if isinstance(doc.get("procedures"), dict) else {}
        for name, entry in procedures.items():
            if not (isinstance(name, str) and ROLE_NAME_RE.fullmatch(name) and isinstance(entry, dict)):
                outcome.bad(path, None, f"procedures.{name}: not a role name with a version record")
                continue
            version, sha = entry.get("version"), entry.get("sha256")
            if not isinstance(version, int) or isinstance(version, bool) or version < 1 or not isinstance(sha, str):
                outcome.bad(path, None, f"procedures.{name}: version or sha256 missing")
                continue
            if ctx.conn.execute("SELECT 1 FROM role_procedure_versions WHERE role = ?", (name,)).fetchone():
                outcome.present += 1
                continue
            proc = read_procedure(Path(ctx.source_dir), name)
            if not proc.present or proc.sha256 != sha or proc.text is None:
                outcome.count("proceduresChangedSince")  # recorded as a new version at the next send
                continue
            ctx.conn.execute("INSERT INTO role_procedure_versions (role, version, sha256, text, recorded_at) VALUES (?, ?, ?, ?, ?)",
                             (name, version, sha, proc.text, _ms(entry.get("updatedAt"))))
            outcome.imported += 1
        deliveries = doc.get("deliveries") if isinstance(doc.get("deliveries"), dict) else {}
        for name, holders in deliveries.items():
            if not (isinstance(name, str) and isinstance(holders, dict)):
                continue
            for holder, sha in holders.items():
                address = ctx.address(holder)
                if address is None or not isinstance(sha, str):
                    outcome.bad(path, None, f"deliveries.{name}: holder {holder!r} is not an address")
                    continue
                cur = ctx.conn.execute("INSERT OR IGNORE INTO role_procedure_shown (role, holder, sha256, message_id, at)"
                                       " VALUES (?, ?, ?, ?, ?)", (name, address, sha, SHOWN_BY_IMPORT, now_ms()))
                outcome.count("shownImported" if cur.rowcount == 1 else "shownPresent")


def _ms(value: Any) -> int:
    """Epoch ms of an ISO 8601 time, now when it is missing or unreadable."""
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    return now_ms()
