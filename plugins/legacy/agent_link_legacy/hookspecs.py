"""The hook the legacy plugin calls and other plugins implement (docs/plugins.md, section 3; declared in
:data:`agent_link_legacy.AGENT_LINK_HOOKSPECS`, so it is imported only when the importers are needed)."""

from __future__ import annotations

from agent_link_core.lazy import hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any, Callable


@hookspec
def agent_link_register_legacy_importers(register: Callable[[Any], None]) -> None:
    """Contribute importers of the original Agent Link's files (``agent-link import-legacy``). Called by the legacy
    plugin when ``import-legacy`` or health first needs the importers; the rules an importer's ``run`` keeps are in
    docs/plugins.md ("What registration refuses"). Implement it with ``@hookimpl(optionalhook=True)``, so the plugin
    loads without the legacy plugin.

    :param register: call it with an :class:`agent_link_legacy.contract.LegacyImporter` per kind of the original's
        state (import it inside the implementation).
    """
