"""The ``Stop`` hook's block: a session about to stop with a reminder due is kept going with that reminder, at most once
per reminder interval (``AGENT_LINK_REMINDER_INTERVAL_MS``) per session, however many processes run the hook. The one
block per interval is a row of this plugin's ``nudge_blocks`` table (owner ``claude``), whose primary key
``(recipient, bucket)`` lets only one process claim it. Imported only for ``Stop`` events, and light until a reminder is due.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_link_core.hook import HookContext

#: the table of the blocks (``bucket``: floor(epoch ms / reminder interval)), the plugin's migration 1; databases the core
#: made before this plugin owned it already hold it, so the step only creates it where it is missing
NUDGE_BLOCKS_SQL = """
    CREATE TABLE IF NOT EXISTS nudge_blocks (
        recipient TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        at INTEGER NOT NULL,            -- epoch ms
        PRIMARY KEY (recipient, bucket)
    );
    """


def block_reason(ctx: HookContext, address: str, via: str, stop_hook_active: bool) -> str | None:
    """The reminder text to block ``address``'s stop with (claimed, and so counted, as a reminder through ``via``), or None:
    nothing due, a block within the interval, ``stop_hook_active`` (the host already continues because of a block, so a
    stop never loops), another process writing (the next stop tries again) or the table not made yet (no process has
    opened the database with this plugin since it was installed)."""
    box = ctx.mailbox if not stop_hook_active and ctx.mail_of(address)[1] else None
    if box is None or not box.due_reminders(address):
        return None
    import sqlite3  # only now: a stop without a reminder due reads through sqlite3's C module alone (HookContext)

    from agent_link_core.errors import AgentLinkError
    from agent_link_core.store import now_ms

    now, interval = now_ms(), ctx.config.reminder_interval_ms
    recent = "SELECT 1 FROM nudge_blocks WHERE recipient = ? AND at > ?"
    try:
        if box.store.conn.execute(recent, (address, now - interval)).fetchone():
            return None
        with box.store.write(wait=False) as conn:  # the check again under the lock: racing stops block once
            if conn.execute(recent, (address, now - interval)).fetchone() or conn.execute(
                    "INSERT OR IGNORE INTO nudge_blocks (recipient, bucket, at) VALUES (?, ?, ?)",
                    (address, now // interval, now)).rowcount != 1:
                return None
    except sqlite3.OperationalError:  # no such table yet, or the database busy: this stop is not blocked
        return None
    except AgentLinkError as exc:
        if exc.code != "state_busy":
            raise
        return None
    return ctx.due_reminder_note(address, via)
