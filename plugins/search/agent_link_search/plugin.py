"""Entry point of the agent-link search plugin, registered under the ``agent_link`` group.

Hooks: the ``message_fts`` index and ``session_titles`` (schema, owner ``search``), the
``search_agent_link_messages`` tool, the ``search`` command (declared here, imported when run;
docs/plugins.md, "Declare now, import when used") and ``agent_link_sessions_listed``, which
keeps the titles sessions are listed with so that search finds their mail by title.
"""

from __future__ import annotations

from agent_link_core import hookimpl
from agent_link_core.contribute import commands, migrations, registers
from agent_link_core.errors import AgentLinkError

from agent_link_search.schema import SEARCH_MIGRATIONS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    from agent_link_core.app import App

agent_link_schema = migrations(SEARCH_MIGRATIONS)
agent_link_register_tools = registers("agent_link_search.tools:TOOLS")
agent_link_register_commands = commands(
    ("search", "agent_link_search.cli:search_command",
     "Search the messages you sent or received (all with AGENT_LINK_INSPECT_ALL=1).", "reader"),
)


@hookimpl
def agent_link_sessions_listed(sessions: list[dict[str, Any]], app: App) -> None:
    """Remember the titles the listed sessions have (one short write when one changed)."""
    from agent_link_search.index import note_session_titles

    try:
        with app.store.write(wait=False) as conn:  # a listing never waits on a writer for this cache
            note_session_titles(conn, [(s["address"], s["title"]) for s in sessions])
    except AgentLinkError:
        pass  # busy, damaged or replaced: titles are a search aid, noted at the next listing
