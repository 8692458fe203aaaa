"""Entry point of the agent-link budgets plugin, registered under the ``agent_link`` group.

Hooks: the ``AGENT_LINK_READ_BYTES`` setting; ``agent_link_fit_read``, asked by every inbox read that found mail;
``agent_link_push_notice``, asked by a push larger than the recipient's host shows in one piece.
"""

from __future__ import annotations

from agent_link_core import hookimpl

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable
    from typing import Any

    from agent_link_core.app import App
    from agent_link_core.config import Setting
    from agent_link_core.model import Caller
    from agent_link_core.reading import ReadDraft


# Hand-written hooks, not agent_link_core.contribute's one-liners: every inbox read that found mail loads this module
# and must not import contribute (tests/test_lazy_plugins.py, INBOX_PLUGIN_MODULES).
@hookimpl
def agent_link_register_settings(register: Callable[[Setting], None]) -> None:
    from agent_link_budgets.fit import SETTINGS

    for setting in SETTINGS:
        register(setting)


@hookimpl
def agent_link_fit_read(caller: Caller, read: ReadDraft, app: App) -> int:
    from agent_link_budgets.fit import caller_budget, fit

    return fit(read, caller_budget(app, caller))


@hookimpl
def agent_link_push_notice(message: dict[str, Any], size: int) -> str:
    from agent_link_budgets.fit import oversized_notice

    return oversized_notice(message, size)
