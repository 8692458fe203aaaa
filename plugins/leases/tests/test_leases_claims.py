"""Claims other plugins make through ``agent_link_claim_paths`` with a ``key``: a claim under a
key replaces what was claimed under it (whoever held it) in one transaction, a refused one
changes nothing, ``agent_link_release_claims`` ends them, and a holder's own renewal keeps
them tied."""

from __future__ import annotations

from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, active, claim


async def claim_through_hook(app: App, holder: str, paths: list[str], project_root: str, reason: str | None = None,
                             until_resolved: str | None = None, key: str | None = None) -> Any:
    """``agent_link_claim_paths`` as the projects and roles plugins call it."""
    return await app.hooks.acall("agent_link_claim_paths", holder=holder, paths=paths, project_root=project_root, reason=reason,
                                 ttl_ms=None, until_resolved=until_resolved, key=key)

pytestmark = pytest.mark.anyio


def _held(app: App) -> list[tuple[str, str, str | None]]:
    return [(x["holder"], x["path"], x["claimKey"]) for x in active(app.store, now_ms())]


async def test_a_claim_under_a_key_moves_to_its_new_holder_in_one_step(app: App, repo: str) -> None:
    first = await claim_through_hook(app, holder="stand-in", paths=["src", "docs/*.md"], project_root=repo, key="role:build")
    assert first is not None and [x["claimKey"] for x in first["leases"]] == ["role:build", "role:build"]
    # the new holder's claim replaces the stand-in's: no clash with it, and what it leaves out ends
    moved = await claim_through_hook(app, holder="test:bob", paths=["src"], project_root=repo, reason="builder", key="role:build")
    assert moved is not None and _held(app) == [("test:bob", "src", "role:build")]
    # another key clashes as anyone would
    with pytest.raises(AgentLinkError) as clash:
        await claim_through_hook(app, holder="test:carol", paths=["src/a.py"], project_root=repo, key="role:review")
    assert clash.value.code == "lease_conflict" and clash.value.details["conflicts"][0]["holder"] == "test:bob"


async def test_a_refused_claim_under_a_key_leaves_the_earlier_one(app: App, repo: str) -> None:
    claim(app.store, "test:alice", Project(repo, False), ["notes"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    await claim_through_hook(app, holder="test:bob", paths=["src"], project_root=repo, key="role:build")
    with pytest.raises(AgentLinkError) as clash:
        await claim_through_hook(app, holder="test:carol", paths=["src", "notes/x.md"], project_root=repo, key="role:build")
    assert [c["holder"] for c in clash.value.details["conflicts"]] == ["test:alice"]
    assert _held(app) == [("test:alice", "notes", None), ("test:bob", "src", "role:build")]


async def test_release_claims_ends_only_that_key(app: App, repo: str, run_tool: Any) -> None:
    await claim_through_hook(app, holder="test:alice", paths=["src"], project_root=repo, key="role:build")
    mine = await run_tool(app, "lease_paths", {"paths": ["docs"], "projectRoot": repo})
    assert mine["ok"], mine
    # a renewal by the holder itself keeps the lease tied to its key
    renewed = await run_tool(app, "lease_paths", {"paths": ["src"], "projectRoot": repo, "reason": "still building"})
    assert renewed["renewed"] == ["src"] and renewed["leases"][0]["claimKey"] == "role:build"
    ended = app.hooks.call("agent_link_release_claims", key="role:build")
    assert ended is not None and [(x["holder"], x["path"]) for x in ended["released"]] == [("test:alice", "src")]
    assert _held(app) == [("test:alice", "docs", None)]
    assert app.hooks.call("agent_link_release_claims", key="role:build") == {"released": []}


async def test_a_keyed_lease_is_listed_with_its_key(app: App, repo: str, run_tool: Any) -> None:
    await claim_through_hook(app, holder="test:bob", paths=["src"], project_root=repo, key="role:build")
    listed = await run_tool(app, "list_leases", {"holder": "test:bob"})
    assert [(x["path"], x["claimKey"], x["untilResolved"]) for x in listed["leases"]] == [("src", "role:build", None)]


async def test_a_claims_long_reason_is_cut_to_the_limit(app: App, repo: str) -> None:
    from agent_link_leases.schema import MAX_REASON_CHARS

    task = "project worker (build): " + "t" * 5000  # a worker's whole task as its reason
    got = await claim_through_hook(app, holder="codex:worker", paths=["src"], project_root=repo, reason=task, key="01JZ0000000000000000000002")
    assert got is not None
    reason = got["leases"][0]["reason"]
    assert len(reason) == MAX_REASON_CHARS and reason.startswith("project worker (build): ttt") and reason.endswith("...")
