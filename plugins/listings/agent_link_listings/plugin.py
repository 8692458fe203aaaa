"""Entry point of the agent-link listings plugin, registered under the ``agent_link`` group.

Hooks: the ``sessions``, ``who``, ``find``, ``contacts`` and ``watch`` commands, declared here
and imported when run (docs/plugins.md, "Declare now, import when used"); the ``contacts``
table, and the CLI targets it turns into addresses.
"""

from __future__ import annotations

from agent_link_core import hookimpl
from agent_link_core.contribute import commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.store import Migration

#: ``contacts`` (listings 1): one alias per session. Databases the core made before this plugin owned it hold it already.
CONTACTS_SQL = """
    CREATE TABLE IF NOT EXISTS contacts (
        alias TEXT PRIMARY KEY,         -- trimmed, lower case
        address TEXT NOT NULL UNIQUE,   -- one alias per session
        project TEXT,
        label TEXT,
        last_seen INTEGER,              -- epoch ms
        created_at INTEGER NOT NULL
    );
    """


@hookimpl
def agent_link_schema() -> list[Migration]:
    """The ``contacts`` table."""
    from agent_link_core.store import Migration

    return [Migration("listings", 1, CONTACTS_SQL)]


@hookimpl
def agent_link_resolve_address(address: str, app: App) -> dict[str, Any] | None:
    """A contact's alias (a CLI target such as ``agent-link send bob``; an alias has no ``:``) → ``{"address"}`` of its
    session; None for anything else."""
    if ":" in address:
        return None
    row = app.store.conn.execute("SELECT address FROM contacts WHERE alias = ?", (address.strip().lower(),)).fetchone()
    return None if row is None else {"address": row[0], "via": None}

agent_link_register_commands = commands(
    ("sessions", "agent_link_listings.cli:sessions", "List every agent session on this machine, newest first.", "reader"),
    ("who", "agent_link_listings.cli:who", "Live sessions merged with your contacts.", "reader"),
    ("find", "agent_link_listings.cli:find", "Find an agent by alias, project, title or id: answers none, one or many.", "reader"),
    ("contacts", "agent_link_listings.cli:contacts",
     "Short aliases for sessions (trimmed, lower case, unique, one per session)."),
    ("watch", "agent_link_listings.watch:watch_command",
     "Follow new mail to and from an address, and status changes, until interrupted (Ctrl-C).", "reader"),
)
