"""The source kinds the Claude Code harness declares (``--source`` of ``agent-link sessions``)
are the surfaces its sessions get."""

from agent_link_claude.harness import ClaudeHarness
from agent_link_claude.sessions import SIDECAR_DIRS


def test_declared_source_kinds_are_the_sidecar_surfaces() -> None:
    assert set(ClaudeHarness.source_kinds) == {surface for _, surface in SIDECAR_DIRS}
