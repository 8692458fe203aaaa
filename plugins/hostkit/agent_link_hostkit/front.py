"""The host kit's MCP start-up front as ``agent-link mcp`` finds it: the object its
``pyproject.toml`` declares in the ``agent_link_mcp_front`` entry-point group (docs/plugins.md,
"The MCP start-up front"). ``start``, ``stop_learning`` and ``finish`` are the front's
(:mod:`agent_link_hostkit.fastfront`); :func:`stdio_server` is the transport that answers every
line (:mod:`agent_link_hostkit.stdio_transport`), imported only when the full server asks for
it: loading this module imports no more than the front does.
"""

from __future__ import annotations

from agent_link_hostkit.fastfront import finish, start, stop_learning

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = ["finish", "start", "stdio_server", "stop_learning"]


def stdio_server() -> Any:
    """:func:`agent_link_hostkit.stdio_transport.stdio_server` over the process's stdin and
    stdout: an async context manager yielding ``(read_stream, write_stream)``."""
    from agent_link_hostkit.stdio_transport import stdio_server as transport

    return transport()
