"""The original's Claude-side legacy state (``agent-link import-legacy``, docs/legacy.md).

Older versions of the original kept the mailbox under Claude Code's config dir
(``~/.claude/agent-link/mailbox.jsonl`` and ``$CLAUDE_CONFIG_DIR/agent-link/mailbox.jsonl``)
and read it before the current one; they are imported first, with the core's mailbox
importer. The original also stored Claude session ids bare, or as ``local_<id>`` (a Claude
Desktop sidecar id), with no kind meaning Claude: :meth:`ClaudeMailboxImporter.legacy_address`
turns them into ``claude:<id>``.
"""

from __future__ import annotations

import os

from agent_link_core.addresses import is_address
from agent_link_legacy.contract import LegacyContext
from agent_link_legacy.engine import MailboxImporter

SIDECAR_PREFIX = "local_"


def claude_mailbox_paths(ctx: LegacyContext) -> list[str]:
    """``~/.claude/agent-link/mailbox.jsonl`` then ``$CLAUDE_CONFIG_DIR/agent-link/mailbox.jsonl``."""
    paths = [os.path.join(ctx.home, ".claude", "agent-link", "mailbox.jsonl")]
    explicit = (ctx.app.env.get("CLAUDE_CONFIG_DIR") or "").strip()
    if explicit:
        if explicit == "~" or explicit.startswith("~/"):
            explicit = ctx.home + explicit[1:]
        paths.append(os.path.join(explicit, "agent-link", "mailbox.jsonl"))
    return paths


class ClaudeMailboxImporter(MailboxImporter):
    """The core's mailbox importer over the Claude-side paths, knowing Claude's legacy ids."""

    def __init__(self) -> None:
        super().__init__("claude-mailbox", claude_mailbox_paths, order=10)

    def legacy_address(self, session_id: str, kind: str | None) -> str | None:
        if kind not in (None, "claude") or ":" in session_id:
            return None
        bare = session_id[len(SIDECAR_PREFIX):] if session_id.startswith(SIDECAR_PREFIX) else session_id
        address = f"claude:{bare}"
        return address if is_address(address) else None
