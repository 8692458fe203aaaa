"""The hook this plugin calls and implements, which another plugin may implement too (docs/plugins.md, section 3; declared
in :data:`agent_link_waits.AGENT_LINK_HOOKSPECS`, so it is imported only when a wait starts)."""

from __future__ import annotations

from collections.abc import Awaitable

from agent_link_core.boundary import expect
from agent_link_core.lazy import hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_core.tools.registry import Progress


@hookspec(firstresult=True, refuses=True, awaitable=True, bound_s=700.0,  # a wait's 600 s, its last poll and push
          check=expect(lambda r: type(r) is dict and type(r.get("outcome")) is str, "expected a wait's answer {'outcome': ...}"))
def agent_link_wait_for_reply(caller: Caller, message_id: str, timeout_ms: int, poll_ms: int, progress: Progress | None,
                              mark: bool, app: App) -> Awaitable[dict[str, Any]] | None:
    """Wait for the resolution of a message the caller sent: ``message_agent``'s ``waitForReply`` and ``agent-link send
    --wait``, which this plugin adds. Called once the message is stored and pushed; its awaitable runs up to 700 s, not the
    hook budget. Another plugin may implement it (``@hookimpl(optionalhook=True)``) to wait its own way.

    :param caller: who waits (the sender of ``message_id``).
    :param message_id: the message whose answer is awaited.
    :param timeout_ms: how long to wait at most, in ms (0-600000).
    :param poll_ms: ms between re-checks when no commit wakes the wait.
    :param progress: the tool call's progress reporter (the call may outlast a client's cut), or None.
    :param mark: mark the reply delivered to ``caller`` when it is returned; False when the caller marks it once shown.
    :param app: the App.
    :returns: an awaitable of ``{"outcome": reply | declined | done | unresolved | expired | timeout, "waitedMs", "timedOut",
        "reply"?, "resolution"?, "warnings"?, ...}`` (the ``wait_for_agent`` tool's answer), or None.
    :raises AgentLinkError: as a read of ``message_id`` by ``caller`` does (``state_busy``...).
    """
