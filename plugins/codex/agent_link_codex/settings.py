"""The Codex plugin's environment settings and the paths derived from them.

Names, aliases and defaults follow the original (docs/behaviour.md §23);
the core parses them (canonical name first, deprecated aliases reported by health). Programs
and sockets are ``str`` settings, not ``path`` ones: ``CODEX_BIN=codex`` or a relative socket
path are legitimate values, and a ``path`` setting that is not absolute would stop the whole
server from starting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from agent_link_core.config import Setting
from agent_link_core.harness_decl import SenderOption

#: `agent-link send --from-thread T [--from-endpoint E]`: identify_caller gets exactly these keys
SENDER_OPTIONS = (
    SenderOption("--from-thread", "threadId", "Act as this Codex thread (unverified), when not inside one."),
    SenderOption("--from-endpoint", "endpointId", "The Codex app-server endpoint of --from-thread, when several know it.",
                 requires="--from-thread"),
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib is imported by the functions using it, not by every command's plugin load
    from typing import Any
    from pathlib import Path

DEFAULT_IDLE_MS = 300_000
#: the Codex release this agent-link was verified against: the pin of its real-host tests, ``hosts/package.json``
#: (a test holds the two equal); health warns ``codex_version_differs`` when the installed Codex reports another
VERIFIED_CODEX_VERSION = "0.171.0"
DEFAULT_STARTUP_TIMEOUT_MS = 15_000

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "AGENT_LINK_CODEX_URL", "str", None, aliases=("CODEX_AGENT_LINK_URL", "CODEX_APP_SERVER_URL"),
        doc="WebSocket URL of a Codex app-server to use (ws://127.0.0.1:<port>/)",
    ),
    Setting(
        "AGENT_LINK_CODEX_SOCK", "str", None, aliases=("CODEX_AGENT_LINK_SOCK", "CODEX_APP_SERVER_SOCK"),
        doc="Unix socket of a Codex app-server to use (codex app-server --listen unix://PATH)",
    ),
    Setting(
        "AGENT_LINK_CODEX_EXTRA_SOCK", "str", None, aliases=("CODEX_APP_SERVER_SOCKET",),
        doc="one more app-server Unix socket to use besides the others, never registered"
            " (CODEX_APP_SERVER_SOCKET is agent-session-intercom's name for it)",
    ),
    Setting(
        "AGENT_LINK_CODEX_SOURCE_ENDPOINT", "str", None, aliases=("AGENT_SESSION_INTERCOM_SOURCE_ENDPOINT",),
        doc="the endpoint id (ep_...) whose thread CODEX_THREAD_ID names, when several app-servers know it",
    ),
    Setting(
        "AGENT_LINK_CODEX_TOKEN_FILE", "path", None,
        doc="file holding the capability token for AGENT_LINK_CODEX_URL (--ws-auth capability-token)",
    ),
    Setting(
        "AGENT_LINK_CODEX_AUTOSTART", "flag", True, aliases=("CODEX_AGENT_LINK_AUTOSTART",),
        doc="start a private Codex app-server when none is reachable",
    ),
    Setting(
        "AGENT_LINK_CODEX_BIN", "str", None, aliases=("CODEX_AGENT_LINK_CODEX_BIN", "CODEX_BIN"),
        doc="the codex program (name on PATH or path); found on PATH and in the usual places when unset",
    ),
    Setting(
        "AGENT_LINK_CODEX_APP_SERVER_BIN", "str", None,
        aliases=("CODEX_AGENT_LINK_APP_SERVER_BIN", "CODEX_APP_SERVER_BIN"),
        doc="a program run as '<bin> --listen ...' instead of 'codex app-server --listen ...'",
    ),
    Setting(
        "AGENT_LINK_CODEX_TRANSPORT", "choice", "unix", aliases=("CODEX_AGENT_LINK_APP_SERVER_TRANSPORT",),
        choices=("unix", "ws-token"), doc="how the private app-server listens: unix socket or token-protected loopback WebSocket",
    ),
    Setting(
        "AGENT_LINK_CODEX_IDLE_MS", "int", DEFAULT_IDLE_MS, aliases=("CODEX_AGENT_LINK_APP_SERVER_IDLE_MS",),
        minimum=0, maximum=86_400_000, doc="stop the private app-server after this many ms without requests (0 = never; at most 86400000, a day)",
    ),
    Setting(
        "AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS", "int", DEFAULT_STARTUP_TIMEOUT_MS,
        aliases=("CODEX_AGENT_LINK_APP_SERVER_STARTUP_MS",), minimum=500, maximum=120_000,
        doc="how long the private app-server may take to start, in ms",
    ),
    Setting(
        "AGENT_LINK_MANAGED_DIR", "path", None, aliases=("CODEX_AGENT_LINK_STATE_DIR",),
        doc="records and sockets of private app-servers (default <state>/managed-app-servers)",
    ),
    Setting("AGENT_LINK_CODEX_REMOTE_TOKENS", "flag", False,
            doc="allow sending an endpoint's token to a wss:// app-server on another host (never over ws://)"),
    Setting("AGENT_LINK_CODEX_REMINDERS", "flag", True, doc="remind idle Codex threads of unresolved mail with a turn"),
    Setting(
        "AGENT_LINK_CODEX_DESKTOP_PUSH", "choice", "mailbox-only", choices=("mailbox-only", "shared-daemon"),
        doc="threads held by another app-server get mail only (mailbox-only), or turns too (shared-daemon, needs an explicit endpoint)",
    ),
    Setting(
        "AGENT_LINK_CODEX_MCP_SERVER", "str", None,
        doc="the name agent-link's MCP server has in Codex's config (a turn agent-link starts waits for it to be ready);"
            " default: codex-agent-link (the plugin's key) and agent-link (a hand-written entry)",
    ),
    Setting(
        "AGENT_LINK_CODEX_MCP_READY_MS", "int", 20_000, minimum=0, maximum=120_000,
        doc="how long, in ms, a turn agent-link starts waits for agent-link's MCP server to finish starting on the thread",
    ),
    Setting("AGENT_LINK_GUI_OPEN_DRY_RUN", "flag", False, doc="launch_codex_thread openInGui: do not actually open the app"),
)


def codex_home(env: Mapping[str, str]) -> Path:
    """``$CODEX_HOME``, else ``~/.codex`` (``HOME`` from ``env``)."""
    from pathlib import Path

    explicit = env.get("CODEX_HOME")
    if explicit:
        return Path(os.path.expanduser(explicit))
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".codex"


def control_socket(env: Mapping[str, str]) -> Path:
    """The default control socket: ``$CODEX_HOME/app-server-control/app-server-control.sock``."""
    return codex_home(env) / "app-server-control" / "app-server-control.sock"


def managed_dir(values: Mapping[str, Any], state_dir: Path) -> Path:
    """Where private app-server records and sockets live."""
    from pathlib import Path

    explicit = values.get("AGENT_LINK_MANAGED_DIR")
    return Path(explicit) if explicit else state_dir / "managed-app-servers"
