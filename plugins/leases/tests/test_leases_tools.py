"""The lease tools, called in-process: schemas, claims, conflicts, renewal, release, listing,
expiry, and every error they return."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.model import Caller
from agent_link_core.store import now_ms
from agent_link_core.tools.registry import ToolCall, validate_arguments
from agent_link_leases.table import Project, active, claim

ALICE = Caller("test:alice", "config", "test")
BOB = Caller("test:bob", "config", "test")

pytestmark = pytest.mark.anyio

TOOLS = ("lease_paths", "release_paths", "list_leases")


def test_schemas(app: App) -> None:
    tools = app.hooks.tools()
    lease = tools["lease_paths"].input_schema
    assert lease["required"] == ["paths"] and lease["additionalProperties"] is False
    assert set(lease["properties"]) == {"paths", "exclusive", "ttlMs", "reason", "projectRoot"}
    assert lease["properties"]["exclusive"]["default"] is True
    assert set(tools["release_paths"].input_schema["properties"]) == {"paths", "projectRoot"}
    assert "required" not in tools["release_paths"].input_schema
    assert set(tools["list_leases"].input_schema["properties"]) == {"path", "holder", "projectRoot"}
    assert tools["list_leases"].read_only and not tools["lease_paths"].read_only and tools["release_paths"].idempotent


BAD_ARGUMENTS = [
    ("lease_paths", {}, "paths"),
    ("lease_paths", {"paths": []}, "paths"),
    ("lease_paths", {"paths": [""]}, "paths.0"),
    ("lease_paths", {"paths": ["a"], "ttlMs": 10}, "ttlMs"),
    ("lease_paths", {"paths": ["a"], "exclusive": "maybe"}, "exclusive"),
    ("lease_paths", {"paths": ["a"], "bogus": 1}, "bogus"),
    ("lease_paths", {"paths": ["a"], "reason": "r" * 1001}, "reason"),
    ("lease_paths", {"paths": ["a" * 5000]}, "paths.0"),
    ("release_paths", {"paths": []}, "paths"),
    ("list_leases", {"holder": "not an address"}, "holder"),
]


@pytest.mark.parametrize(("name", "args", "path"), BAD_ARGUMENTS)
async def test_schema_refusals(app: App, run_tool: Any, name: str, args: dict[str, Any], path: str) -> None:
    out = await run_tool(app, name, args)
    assert out["ok"] is False and out["error"]["code"] == "invalid_arguments"
    assert path in [e["path"] for e in out["error"]["details"]["errors"]]


async def test_claim_conflict_renew_release(app: App, run_tool: Any, repo: str) -> None:
    got = await run_tool(app, "lease_paths", {"paths": ["src/pkg", "docs/*.md"], "reason": "refactor", "projectRoot": repo})
    assert got["ok"] and got["projectRoot"] == repo and got["renewed"] == []
    assert [(x["path"], x["exclusive"], x["holder"]) for x in got["leases"]] == [("src/pkg", True, "test:alice"), ("docs/*.md", True, "test:alice")]

    # bob's claim overlaps both: refused whole, naming the holder, what it holds and why
    refused = await run_tool(app, "lease_paths", {"paths": ["src/**/*.py", "README.md"], "projectRoot": repo}, BOB)
    assert refused["ok"] is False and refused["error"]["code"] == "lease_conflict"
    [conflict] = refused["error"]["details"]["conflicts"]
    assert conflict["holder"] == "test:alice" and conflict["paths"] == ["src/pkg"] and conflict["exclusive"] is True
    assert conflict["reason"] == "refactor" and conflict["expiresAt"] == got["leases"][0]["expiresAt"]
    assert conflict["requested"] == ["src/**/*.py"] and "test:bob" in conflict["message"] and "src/pkg" in conflict["message"]
    assert [x["holder"] for x in (await run_tool(app, "list_leases", {}))["leases"]] == ["test:alice", "test:alice"]  # README.md not granted

    # a path nobody holds; the holder's own claims never clash with themselves
    assert (await run_tool(app, "lease_paths", {"paths": ["README.md"], "projectRoot": repo}, BOB))["ok"]
    renewed = await run_tool(app, "lease_paths", {"paths": ["src/pkg/", "src/pkg/x.py"], "exclusive": False, "projectRoot": repo, "ttlMs": 5000})
    assert renewed["ok"] and renewed["renewed"] == ["src/pkg"]
    assert renewed["leases"][0]["id"] == got["leases"][0]["id"] and renewed["leases"][0]["exclusive"] is False
    assert renewed["leases"][0]["expiresInMs"] <= 5000

    # shared with shared passes; exclusive against shared does not
    assert (await run_tool(app, "lease_paths", {"paths": ["src/pkg/y.py"], "exclusive": False, "projectRoot": repo}, BOB))["ok"]
    clash = await run_tool(app, "lease_paths", {"paths": ["src/pkg/x.py"], "projectRoot": repo}, BOB)
    assert clash["error"]["code"] == "lease_conflict"
    # one entry per holder, reason and expiry: the renewal kept src/pkg's reason
    assert sorted((c["paths"], c["reason"]) for c in clash["error"]["details"]["conflicts"]) == [
        (["src/pkg"], "refactor"), (["src/pkg/x.py"], None)]

    listed = await run_tool(app, "list_leases", {"path": "src/pkg/y.py", "projectRoot": repo})
    assert [(x["holder"], x["path"]) for x in listed["leases"]] == [("test:alice", "src/pkg"), ("test:bob", "src/pkg/y.py")]
    assert [x["path"] for x in (await run_tool(app, "list_leases", {"holder": "test:bob"}))["leases"]] == ["README.md", "src/pkg/y.py"]

    one = await run_tool(app, "release_paths", {"paths": ["./src/pkg", "nope.txt"], "projectRoot": repo})
    assert [x["path"] for x in one["released"]] == ["src/pkg"] and one["notHeld"] == ["nope.txt"]
    everything = await run_tool(app, "release_paths", {})
    assert [x["path"] for x in everything["released"]] == ["docs/*.md", "src/pkg/x.py"]
    assert [x["holder"] for x in (await run_tool(app, "list_leases", {}))["leases"]] == ["test:bob", "test:bob"]


async def test_default_root_is_the_git_top_level(app: App, run_tool: Any, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(repo, "src", "pkg"))
    got = await run_tool(app, "lease_paths", {"paths": ["src/a.py"]})
    assert got["projectRoot"] == repo and got["leases"][0]["path"] == "src/a.py"


async def test_bad_input_errors(app: App, run_tool: Any, repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = await run_tool(app, "lease_paths", {"paths": ["src/ok.py", "../etc", "/etc/passwd", " "], "projectRoot": repo})
    assert outside["error"]["code"] == "invalid_arguments"
    assert [(e["path"], e["rule"]) for e in outside["error"]["details"]["errors"]] == [
        ("paths.1", "outside_root"), ("paths.2", "outside_root"), ("paths.3", "empty")]
    assert (await run_tool(app, "list_leases", {}))["leases"] == []  # nothing of it stored
    relative = await run_tool(app, "lease_paths", {"paths": ["a"], "projectRoot": "repo"})
    assert relative["error"]["details"]["errors"][0]["path"] == "projectRoot"
    missing = await run_tool(app, "lease_paths", {"paths": ["a"], "projectRoot": str(tmp_path / "missing")})
    assert missing["error"]["details"]["errors"][0]["path"] == "projectRoot"
    bad_glob = await run_tool(app, "list_leases", {"path": "src/[x", "projectRoot": repo})
    assert bad_glob["error"]["details"]["errors"][0] == {"path": "path", "rule": "unclosed_class", "expected": bad_glob["error"]["details"]["errors"][0]["expected"]}
    nowhere = tmp_path / "nogit"
    nowhere.mkdir()
    monkeypatch.chdir(nowhere)
    no_root = await run_tool(app, "lease_paths", {"paths": ["a"]})
    assert no_root["error"]["code"] == "invalid_arguments" and "projectRoot" in no_root["error"]["message"]
    anonymous = await run_tool(app, "lease_paths", {"paths": ["a"], "projectRoot": repo}, Caller())
    assert anonymous["error"]["code"] == "no_current_session"


async def test_size_limits(app: App, run_tool: Any, repo: str) -> None:
    long_name = await run_tool(app, "lease_paths", {"paths": ["src/a.py", "src/" + "n" * 256], "projectRoot": repo})
    assert [(e["path"], e["rule"]) for e in long_name["error"]["details"]["errors"]] == [("paths.1", "segment_too_long")]
    assert "255 bytes" in long_name["error"]["details"]["errors"][0]["expected"]
    long_path = await run_tool(app, "lease_paths", {"paths": [("é" * 100 + "/") * 21], "projectRoot": repo})  # 2121 characters, 4221 bytes
    assert [(e["path"], e["rule"]) for e in long_path["error"]["details"]["errors"]] == [("paths.0", "too_long")]
    listed = await run_tool(app, "list_leases", {"path": "é/" * 1400, "projectRoot": repo})  # 2800 characters, 4200 bytes
    assert [(e["path"], e["rule"]) for e in listed["error"]["details"]["errors"]] == [("path", "too_long")]
    released = await run_tool(app, "release_paths", {"paths": ["n" * 256], "projectRoot": repo})
    assert released["error"]["details"]["errors"][0]["path"] == "paths.0"
    assert (await run_tool(app, "lease_paths", {"paths": ["src"], "reason": "r" * 1000, "projectRoot": repo}))["ok"]
    assert (await run_tool(app, "list_leases", {}))["leases"][0]["reason"] == "r" * 1000


async def warned(app: App, name: str, args: dict[str, Any], caller: Caller = ALICE) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A tool's fields and the warnings it reported (``run_tool`` returns the fields alone)."""
    spec = app.hooks.tools()[name]
    call = ToolCall({}, caller, [])
    return await spec.handler(app, validate_arguments(spec, args)[0], call), call.warnings


async def test_a_lease_of_the_whole_project_is_granted_with_a_warning(app: App, run_tool: Any, repo: str) -> None:
    whole, warnings = await warned(app, "lease_paths", {"paths": ["."], "projectRoot": repo})
    assert whole["leases"][0]["path"] == "."
    [warning] = warnings
    assert warning["code"] == "lease_covers_project" and warning["details"] == {"path": ".", "projectRoot": repo, "exclusive": True}
    assert "whole project" in warning["message"]
    assert (await run_tool(app, "lease_paths", {"paths": ["**"], "projectRoot": repo}, BOB))["error"]["code"] == "lease_conflict"
    part, warnings = await warned(app, "lease_paths", {"paths": ["src/*"], "projectRoot": repo})
    assert part["leases"][0]["path"] == "src/*" and warnings == []


async def test_releasing_anothers_lease_names_the_holder_and_leaves_it(app: App, run_tool: Any, repo: str) -> None:
    await run_tool(app, "lease_paths", {"paths": ["src/a.py", "notes"], "exclusive": False, "projectRoot": repo})
    out, warnings = await warned(app, "release_paths", {"paths": ["src/a.py", "notes/x.md", "README.md"], "projectRoot": repo}, BOB)
    assert out["released"] == [] and out["notHeld"] == ["src/a.py", "notes/x.md", "README.md"]
    assert [(o["path"], o["holder"], o["paths"], o["exclusive"]) for o in out["heldByOthers"]] == [
        ("src/a.py", "test:alice", ["src/a.py"], False), ("notes/x.md", "test:alice", ["notes"], False)]
    assert [w["code"] for w in warnings] == ["not_held", "held_by_others", "held_by_others"]
    assert "held by test:alice" in warnings[1]["message"] and warnings[1]["details"] == out["heldByOthers"][0]
    assert [x["path"] for x in (await run_tool(app, "list_leases", {}))["leases"]] == ["src/a.py", "notes"]  # still alice's
    mine = await run_tool(app, "release_paths", {"paths": ["src/a.py"], "projectRoot": repo})
    assert [x["path"] for x in mine["released"]] == ["src/a.py"] and mine["heldByOthers"] == [] and mine["notHeld"] == []
    assert (await run_tool(app, "release_paths", {}))["heldByOthers"] == []


def test_a_lease_ends_when_it_expires(app: App, repo: str) -> None:
    root = Project(repo, False)
    start = now_ms()
    claim(app.store, ALICE.address, root, ["src"], exclusive=True, reason=None, ttl_ms=1000, now=start)
    with pytest.raises(AgentLinkError) as refused:
        claim(app.store, BOB.address, root, ["src/a.py"], exclusive=True, reason=None, ttl_ms=1000, now=start + 999)
    assert refused.value.code == "lease_conflict"
    assert active(app.store, start + 1000) == []
    later = claim(app.store, BOB.address, root, ["src/a.py"], exclusive=True, reason=None, ttl_ms=1000, now=start + 1000)
    assert [x["holder"] for x in later["leases"]] == ["test:bob"]
    rows = app.store.conn.execute("SELECT holder FROM leases").fetchall()
    assert [r[0] for r in rows] == ["test:bob"]  # the expired row was deleted by that write


def test_roots_do_not_mix(app: App, repo: str, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "src").mkdir(parents=True)
    claim(app.store, ALICE.address, Project(repo, False), ["src"], exclusive=True, reason=None, ttl_ms=10_000, now=now_ms())
    got = claim(app.store, BOB.address, Project(os.path.realpath(other), False), ["src"], exclusive=True, reason=None, ttl_ms=10_000, now=now_ms())
    assert got["leases"][0]["holder"] == "test:bob"


def test_health_section(app: App, repo: str) -> None:
    claim(app.store, ALICE.address, Project(repo, False), ["src", "docs"], exclusive=True, reason=None, ttl_ms=10_000, now=now_ms())
    claim(app.store, BOB.address, Project(repo, False), ["README.md"], exclusive=True, reason=None, ttl_ms=10_000, now=now_ms(),
          key="role:writer")
    claim(app.store, "codex:worker", Project(repo, False), ["tests"], exclusive=True, reason=None, ttl_ms=10_000, now=now_ms(),
          key="M1", until_resolved="M1")
    section = app.hooks.health_sections()["leases"]
    assert (section["active"], section["exclusive"], section["holders"], section["roots"]) == (4, 4, 3, 1)
    assert (section["forRoles"], section["forTasks"]) == (1, 1)
    assert "not running" in section["sessionEnd"]


ANCHORS = [("src/pkg/*.py", "src/pkg"), ("src/**", "src"), ("**/x", ""), (".", ""), ("src/[a]b/c", "src/ab/c"), ("a\\*b/c", "a*b/c")]


@pytest.mark.parametrize(("text", "expected"), ANCHORS)
def test_anchor(text: str, expected: str) -> None:
    from agent_link_leases.patterns import parse
    from agent_link_leases.table import anchor

    assert anchor(parse(text)) == expected


@pytest.mark.parametrize(("held", "wanted", "clash"), [
    ("src/pkg/a.py", "src", True),  # held below the claim
    ("src", "src/pkg/a.py", True),  # held above the claim
    ("**/*.py", "src/pkg/a.py", True),  # held with no anchor
    ("src/pkg/a.py", "**/a.py", True),  # claimed with no anchor
    (".", "docs/x", True),
    ("src/pkg/a.py", "src/pkgs", False),  # a sibling whose name extends the anchor
    ("src/pkg0/a.py", "src/pkg", False),  # "0" sorts right after "/"
    ("src/pkg-1/a.py", "src/pkg", False),
])
def test_conflicts_found_through_the_anchor_index(app: App, repo: str, held: str, wanted: str, clash: bool) -> None:
    root = Project(repo, False)
    claim(app.store, ALICE.address, root, [held], exclusive=True, reason=None, ttl_ms=60_000, now=now_ms())
    if not clash:
        assert claim(app.store, BOB.address, root, [wanted], exclusive=True, reason=None, ttl_ms=60_000, now=now_ms())["leases"]
        return
    with pytest.raises(AgentLinkError) as refused:
        claim(app.store, BOB.address, root, [wanted], exclusive=True, reason=None, ttl_ms=60_000, now=now_ms())
    assert refused.value.code == "lease_conflict"


def test_two_spellings_of_one_path_are_one_lease(app: App, repo: str) -> None:
    got = claim(app.store, ALICE.address, Project(repo, False), ["src", "./src/", "docs"], exclusive=True, reason=None,
                ttl_ms=10_000, now=now_ms())
    assert [x["path"] for x in got["leases"]] == ["src", "docs"] and got["renewed"] == []
