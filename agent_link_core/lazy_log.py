"""A module's logger that imports :mod:`logging` only when something is logged: a command
that logs nothing (``agent-link inbox``) never pays for it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class LazyLogger:
    """Stands for ``logging.getLogger(name)``; every attribute (``debug``, ``warning``,
    ``exception``, ``isEnabledFor``...) is the real logger's, imported on first use.

    :param name: the logger's name, as for :func:`logging.getLogger`.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        import logging

        return getattr(logging.getLogger(self.name), attribute)
