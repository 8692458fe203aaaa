"""Two callers of one team and a plugin counting the envelope hook's calls: what the tests of
a read (the core's inbox read, a budgeted read, a conversation read) use to see that each
message's envelope is rendered once per read."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent_link_core import hookimpl
from agent_link_core.model import Caller
from agent_link_core.records import EnvelopeContribution

ME = Caller("team:me", "explicit", "team")
PEER = Caller("team:peer", "explicit", "team")


class Counting:
    """Counts the envelope hook's calls per message id (``calls``: id -> count)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    @hookimpl
    def agent_link_render_envelope(self, message: dict[str, Any]) -> EnvelopeContribution | None:
        self.calls[message["id"]] += 1
        return None
