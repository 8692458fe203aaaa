"""agent-link core: the host-neutral mailbox, envelope, MCP server and CLI.

Plugins write ``from agent_link_core import hookimpl``. The marker is resolved lazily so
that importing this package (as the hook fast path does) costs nothing beyond the package.
"""

# not `from typing import TYPE_CHECKING`: the hook fast path must not pay for importing typing
TYPE_CHECKING = False
if TYPE_CHECKING:  # type checkers see the real marker; at run time it is loaded on first use
    from agent_link_core.lazy import hookimpl

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str) -> object:
    if name == "hookimpl":
        from agent_link_core.lazy import hookimpl

        return hookimpl
    raise AttributeError(f"module 'agent_link_core' has no attribute {name!r}")
