"""The hook the web plugin calls and other plugins implement (docs/plugins.md, section 3; declared in
:data:`agent_link_web.AGENT_LINK_HOOKSPECS`, so it is imported only when the page lists its panels)."""

from __future__ import annotations

from agent_link_core.lazy import hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any, Callable


@hookspec
def agent_link_register_panels(register: Callable[[Any], None]) -> None:
    """Contribute sections to the ``agent-link web`` page. Called by the web plugin each time a page builds its sections;
    implement it with ``@hookimpl(optionalhook=True)`` (or ``registers(..., optionalhook=True)``), so the plugin loads
    without the web plugin.

    :param register: call it with an :class:`agent_link_web.panels.Panel` (import it inside the implementation).
    """
