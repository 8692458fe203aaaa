"""The approvals plugin's environment settings (read by ``agent-link approvals check`` only;
declared so that ``agent-link health`` reports their deprecated names and conflicts)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agent_link_core.config import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib is imported where a path is made, not by every command's plugin load
    from pathlib import Path

CODEX_CONFIG = "AGENT_LINK_CODEX_CONFIG"
CHECK_REAL_CONFIG = "AGENT_LINK_CHECK_REAL_CONFIG"
CODEX_PLUGIN_ID = "AGENT_LINK_CODEX_PLUGIN_ID"

SETTINGS: tuple[Setting, ...] = (
    # ``str``, not ``path``: a relative value is a user's everyday shell path for this command,
    # and a path setting that fails to parse would stop every agent-link process from starting.
    Setting(CODEX_CONFIG, "str", None, aliases=("CODEX_CONFIG",),
            doc="the Codex config.toml `agent-link approvals check` reads when no file is named"),
    Setting(CHECK_REAL_CONFIG, "flag", False,
            doc="`agent-link approvals check` with nothing named reads the real $CODEX_HOME/config.toml"),
    Setting(CODEX_PLUGIN_ID, "str", None, aliases=("CODEX_AGENT_LINK_PLUGIN_ID",),
            doc="the Codex plugin id approvals are keyed by (default: <plugin>@<marketplace> from the manifests)"),
)


def codex_config_path(env: Mapping[str, str]) -> Path:
    """The real Codex config: ``$CODEX_HOME/config.toml``, default ``~/.codex/config.toml``."""
    from pathlib import Path

    home = env.get("CODEX_HOME")
    if home:
        return Path(os.path.expanduser(home)) / "config.toml"
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".codex" / "config.toml"
