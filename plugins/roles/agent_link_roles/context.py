"""The roles plugin's settings and database schema, and its view of the App.

Every hook and tool gets the :class:`~agent_link_core.app.App`; :func:`from_app` gives the
parts this plugin uses (settings as read when the server started, the state folder, the store).
"""

from __future__ import annotations

from agent_link_core.lazy import Struct
from agent_link_core.config import Config, Setting
from agent_link_core.store import Migration, Store

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from agent_link_core.app import App

OWNER = "roles"
#: the role table's file in the state dir (here, so a send can see there is none without loading the table code)
TABLE_FILE = "roles.json"

SETTINGS: tuple[Setting, ...] = (
    Setting("AGENT_LINK_ROLE_ADMIN", "flag", False,
            doc="allow set_agent_role, clear_agent_role and set_agent_override_policy (read once at server start)"),
    Setting("AGENT_LINK_ROLE_ENFORCEMENT", "choice", None, choices=("off", "warn", "enforce"),
            doc="direct coordination between role holders: off, warn or enforce (overrides roles.json)"),
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        OWNER,
        1,
        """
        CREATE TABLE role_procedure_versions (
            role TEXT NOT NULL,
            version INTEGER NOT NULL,       -- 1, 2, ... per role, one per distinct file content in a row
            sha256 TEXT NOT NULL,
            text TEXT NOT NULL,
            recorded_at INTEGER NOT NULL,   -- epoch ms
            PRIMARY KEY (role, version)
        );
        CREATE INDEX role_procedure_versions_sha ON role_procedure_versions (role, sha256);
        CREATE TABLE role_procedure_shown (
            role TEXT NOT NULL,
            holder TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            message_id TEXT NOT NULL,       -- the one message that carries this text to this holder
            at INTEGER NOT NULL,
            PRIMARY KEY (role, holder, sha256)
        );
        CREATE INDEX role_procedure_shown_message ON role_procedure_shown (message_id);
        CREATE TABLE role_holders (
            role TEXT PRIMARY KEY,
            holder TEXT,                    -- last holder handover was applied for (NULL: none)
            updated_at INTEGER NOT NULL
        );
        """,
    ),
)


class RolesContext(Struct, frozen=True):
    """Where the roles plugin reads and writes.

    :param config: parsed settings (the core's and this plugin's), read at App creation.
    :param store: the App's connection to the state database.
    """

    config: Config
    store: Store

    @property
    def state_dir(self) -> Path:
        """The state directory (roles.json and roles/ live here)."""
        from pathlib import Path  # only a role lookup needs it, not every command's plugin load

        return Path(self.config.state_dir)


def from_app(app: App) -> RolesContext:
    """The App's settings and store, as the roles plugin uses them."""
    return RolesContext(app.config, app.store)
