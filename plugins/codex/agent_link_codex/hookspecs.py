"""The hook the codex harness calls and other plugins implement (docs/plugins.md, section 3; declared in
:data:`agent_link_codex.AGENT_LINK_HOOKSPECS`, so it is imported only when a session's settings are to change)."""

from __future__ import annotations

from agent_link_core.boundary import expect, plain
from agent_link_core.lazy import hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.model import Caller


@hookspec(firstresult=True, refuses=True, check=expect(lambda r: type(r) is dict and plain(r) and type(r.get("allowed")) is bool,
                                                       "expected None or a dict with a boolean 'allowed'"))
def agent_link_check_override(
    target: str, sender: Caller, setting: str, value: str, context: dict[str, Any], app: App
) -> dict[str, Any] | None:
    """Decide whether ``sender`` may change ``setting`` of the existing Codex session ``target``. Called by the codex
    harness before it changes an existing thread's model, effort or cwd (:mod:`agent_link_codex.overrides`); implement
    it with ``@hookimpl(optionalhook=True)``, so the plugin loads without the codex plugin.

    :param target: the session's address.
    :param sender: the caller asking (an ``external`` caller never matches a ``*`` policy entry).
    :param setting: ``model`` (with model provider and service tier), ``effort`` or ``cwd``.
    :param value: the requested value (an absolute path for ``cwd``).
    :param context: ``currentCwd`` and ``launchedBy`` (when known).
    :param app: the App.
    :returns: None when no plugin keeps a policy (the harness then allows only the launcher's effort change),
        ``{"allowed": True, "grantedBy": {...}}`` or ``{"allowed": False, "reason": permission_denied reason, "message": str}``.
    :raises AgentLinkError: to refuse the change.
    """
