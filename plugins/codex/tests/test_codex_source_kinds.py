"""The source kinds the Codex harness declares (``--source`` of ``agent-link sessions``) are the
thread source kinds it lists and the surfaces it gives them."""

from agent_link_codex.harness import CodexHarness
from agent_link_codex.service import SOURCE_KINDS
from agent_link_codex.threads import surface_of


def test_declared_source_kinds_are_the_listed_kinds_and_their_surfaces() -> None:
    surfaces = {surface for kind in SOURCE_KINDS for surface in surface_of(kind)}
    assert set(CodexHarness.source_kinds) == {*SOURCE_KINDS, *surfaces}
