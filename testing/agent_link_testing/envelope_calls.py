"""Two callers of one team and a plugin counting what the envelope hook is asked: what the tests
of a read (the core's inbox read, a budgeted read, a conversation read) use to see that the
plugins are asked about each message once per read, in one call."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent_link_core import hookimpl
from agent_link_core.model import Caller
from agent_link_core.records import EnvelopeContribution

ME = Caller("team:me", "explicit", "team")
PEER = Caller("team:peer", "explicit", "team")


class Counting:
    """Counts how often the envelope hook is asked about each message (``calls``: id -> count) and how often it is
    called (``batches``)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.batches = 0

    @hookimpl
    def agent_link_render_envelopes(self, messages: tuple[dict[str, Any], ...]) -> dict[str, EnvelopeContribution] | None:
        self.calls.update(m["id"] for m in messages)
        self.batches += 1
        return None
