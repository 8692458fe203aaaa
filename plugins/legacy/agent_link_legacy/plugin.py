"""Entry point of the agent-link legacy plugin, registered under the ``agent_link`` group.

Hooks: the ``legacy_imports`` table (schema, owner ``legacy``), the importer of the
original's own mailbox (``mailbox``, order 20: before the plugins' records that refer to its
messages), the ``import-legacy`` command, declared here and imported when run
(docs/plugins.md, "Declare now, import when used"), and health's ``legacyState`` section
(:mod:`agent_link_legacy.state`).
"""

from __future__ import annotations

from agent_link_core import hookimpl
from agent_link_core.contribute import commands, migrations

from agent_link_legacy.schema import LEGACY_MIGRATIONS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable
    from agent_link_core.app import App

    from agent_link_legacy.contract import LegacyImporter

agent_link_schema = migrations(LEGACY_MIGRATIONS)

agent_link_register_commands = commands(
    ("import-legacy", "agent_link_legacy.cli:import_legacy_command",
     "Fold the original Agent Link's mailbox, receipts, roles and fork log into the database, once: records already"
     " there are left alone, the original files are kept. Exit 1 when an importer failed."),
)


@hookimpl
def agent_link_register_legacy_importers(register: Callable[[LegacyImporter], None]) -> None:
    """The original's mailbox, ``<state dir>/mailbox.jsonl``."""
    from agent_link_legacy.engine import MailboxImporter, core_mailbox_paths

    register(MailboxImporter("mailbox", core_mailbox_paths, order=20))


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    """``legacyState``: the original's files that exist and whether each is imported
    (:func:`agent_link_legacy.state.legacy_state`)."""
    from agent_link_legacy.state import legacy_state

    return "legacyState", legacy_state(app)
