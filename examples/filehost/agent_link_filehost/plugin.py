"""The hook implementations of the filehost plugin (entry point ``filehost``).

Imports stay light: this module is imported by every ``agent-link`` command and MCP server,
so the harness, the tool and the command load only when their hook runs.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_link_core import hookimpl
from agent_link_core.contribute import migrations, registers
from agent_link_core.config import Setting
from agent_link_core.harness_decl import HarnessDeclaration
from agent_link_core.store import Migration

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    import click

    from agent_link_core.app import App

#: The plugin's name: its entry point's name, its migrations' owner, its address scheme.
NAME = "filehost"

DIR_SETTING = Setting("AGENT_LINK_FILEHOST_DIR", "path", None,
                      doc="where the filehost example keeps sessions.json and inbox files (default <state>/filehost)")

MIGRATIONS = (
    Migration(NAME, 1, """
        CREATE TABLE filehost_deliveries (
            message_id TEXT PRIMARY KEY,    -- one line appended per message, never two
            session TEXT NOT NULL,
            at INTEGER NOT NULL,            -- epoch ms
            bytes INTEGER NOT NULL
        );
    """),
)


#: The harness, declared by what the core reads without its code (the name, the variable
#: naming the caller): :mod:`agent_link_filehost.harness` is imported the first time a
#: command lists, resolves or delivers to filehost sessions, or runs inside one. A command
#: that only reads the mailbox never imports it.
HARNESS = HarnessDeclaration(NAME, "agent_link_filehost.harness:FileHostHarness", caller_variables=("FILEHOST_SESSION",))


@hookimpl
def agent_link_register_harnesses(register: Callable[[HarnessDeclaration], None]) -> None:
    register(HARNESS)


# Fixed records: one line each (agent_link_core.contribute); the tool's module is imported
# only when the tools are listed.
agent_link_register_settings = registers([DIR_SETTING])
agent_link_schema = migrations(MIGRATIONS)
agent_link_register_tools = registers("agent_link_filehost.tools:TOOLS")


@hookimpl
def agent_link_extend_tools() -> dict[str, dict[str, Any]]:
    """What a send to a filehost session adds to ``message_agent``'s result (the harness's ``Delivery.fields``)."""
    return {"message_agent": {"output": {"inboxFile": {"type": "string", "description": "The file under <dir>/inbox the envelope was appended to."}}}}


@hookimpl
def agent_link_register_commands(cli: click.Group) -> None:
    """``agent-link filehost ...``: declared by name and help; its module loads when it runs."""
    from agent_link_core.contribute import command

    cli.add_command(command("filehost", "agent_link_filehost.cli:filehost", "The filehost example host: its sessions file."))


@hookimpl
def agent_link_health(app: App) -> tuple[str, dict[str, Any]]:
    from agent_link_filehost.harness import host_dir

    root = host_dir(app)
    count = app.store.conn.execute("SELECT COUNT(*) FROM filehost_deliveries").fetchone()[0]
    return NAME, {"dir": str(root), "sessionsFile": (root / "sessions.json").exists(), "delivered": int(count)}
