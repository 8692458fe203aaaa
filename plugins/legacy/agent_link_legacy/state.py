"""Health's ``legacy`` section (this plugin's ``agent_link_health``): the original's files that
exist and whether ``import-legacy`` took them, read from the ``legacy_imports`` table."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agent_link_legacy.contract import LegacyContext, existing, importers

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App


def legacy_state(app: App) -> dict[str, Any]:
    """Health's ``legacy`` section: the original's files that exist and whether each is imported.

    ``files[]``: ``{importer, path, bytes, imported, importedAt?, changedSinceImport,
    writtenByAgentLink?}``; ``pending``: files never imported or changed since, except those
    agent-link writes itself (:meth:`LegacyImporter.own_paths`); then ``hint`` names the command;
    ``summary``: health's line for them, when any of the original's own files exists. Cheap: a few ``stat`` calls and one query.
    """
    from agent_link_core.mailbox import iso

    source = app.config.state_dir
    try:
        plugged = importers(app)
    except Exception as exc:  # noqa: BLE001 - health reports, never raises
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    ctx = LegacyContext(app, source, app.store.conn, [i for _, i in plugged])
    files: list[dict[str, Any]] = []
    for _, importer in plugged:
        try:
            paths = existing(importer.paths(ctx))
            own = {os.path.realpath(p) for p in importer.own_paths(ctx)}
        except Exception:  # noqa: BLE001 - one importer's failure leaves only its files out
            continue
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:  # vanished since
                continue
            try:
                rows = app.store.conn.execute(
                    "SELECT size, mtime_ns, imported_at FROM legacy_imports WHERE importer = ? AND path = ?"
                    " ORDER BY imported_at DESC", (importer.name, path)).fetchall()
            except Exception:  # noqa: BLE001 - no table (this plugin never opened this database, or read-only)
                rows = []
            same = [r for r in rows if r["size"] == st.st_size and r["mtime_ns"] == st.st_mtime_ns]
            entry: dict[str, Any] = {"importer": importer.name, "path": path, "bytes": st.st_size, "imported": bool(same),
                                     "changedSinceImport": bool(rows) and not same}
            if rows:
                entry["importedAt"] = iso(rows[0]["imported_at"])
            if os.path.realpath(path) in own:
                entry["writtenByAgentLink"] = True
            files.append(entry)
    pending = [f["path"] for f in files if not f["imported"] and not f.get("writtenByAgentLink")]
    out: dict[str, Any] = {"sourceDir": source, "files": files, "pending": len(pending)}
    if pending:
        out["hint"] = "Run `agent-link import-legacy --dry-run`, then `agent-link import-legacy`, to fold them into the database."
    if theirs := [f for f in files if not f.get("writtenByAgentLink")]:
        out["summary"] = f"original's files: {len(theirs)}, {len(pending)} not imported" + (f" ({out['hint']})" if pending else "")
    return out
