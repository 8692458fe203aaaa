"""The hooks this plugin implements and others call: claims for the sessions they start or give work to (docs/plugins.md,
section 3; declared in :data:`agent_link_leases.AGENT_LINK_HOOKSPECS`, so it is imported only when one is called)."""

from __future__ import annotations

from collections.abc import Awaitable

from agent_link_core.lazy import hookspec

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any

    from agent_link_core.app import App


@hookspec(firstresult=True, refuses=True, awaitable=True)
def agent_link_claim_paths(
    holder: str, paths: list[str], project_root: str, reason: str | None, ttl_ms: int | None,
    until_resolved: str | None, key: str | None, app: App,
) -> Awaitable[dict[str, Any]] | None:
    """Claim files exclusively for a session another plugin starts or gives work to. Called by a plugin that launches a
    session with files to own or assigns a role (the projects and roles plugins): without this plugin the call answers
    ``[]`` (no hook), which the caller takes as "no plugin claims files". This plugin answers it; another plugin keeping
    claims implements it with ``@hookimpl(optionalhook=True)``.

    :param holder: the session's address, or a stand-in name for one not started yet.
    :param paths: files, directories or globs, relative to ``project_root`` or inside it.
    :param project_root: the absolute project root.
    :param reason: why, shown to anyone the claim stops.
    :param ttl_ms: time to live in ms, or None for the plugin's default.
    :param until_resolved: a message id whose resolution ends the claim, or None.
    :param key: names the claim, or None; a claim with a key replaces, in one transaction, what was claimed under it,
        whoever held it.
    :param app: the App.
    :returns: None when no plugin claims files, else an awaitable (a plain function's coroutine) of ``{"projectRoot",
        "leases": [...]}``, raising :class:`~agent_link_core.errors.AgentLinkError` ``lease_conflict`` or
        ``invalid_arguments`` (nothing claimed then).
    """


@hookspec(firstresult=True)
def agent_link_release_claims(key: str, app: App) -> dict[str, Any] | None:
    """End what :func:`agent_link_claim_paths` claimed under ``key``. Called by a plugin whose claim ends early (a worker
    not launched, a role cleared); implemented as :func:`agent_link_claim_paths` is (``@hookimpl(optionalhook=True)``
    in another plugin).

    :param key: the claim's key.
    :param app: the App.
    :returns: None when no plugin claims files, else ``{"released": [lease, ...]}``.
    """
