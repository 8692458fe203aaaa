"""A role that owns files: ``set_agent_role``'s ``leasePaths`` are leased for the holder
(through the ``agent_link_claim_paths`` hook, never an import of the leases plugin), move to
each new holder in one step, end with ``clear_agent_role``; a clash changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_core.tools.registry import ToolCall
from agent_link_roles.table import load_table, table_path

pytestmark = pytest.mark.anyio
ALICE = Caller("test:alice", "config", "test")
ADMIN = Caller("test:admin", "config", "test")


@pytest.fixture
def repo(tmp_path: Path) -> str:
    project = tmp_path / "repo"
    for sub in (".git", "src", "docs", "notes"):
        (project / sub).mkdir(parents=True)
    return os.path.realpath(project)


@pytest.fixture
def leases_loaded(app: App) -> None:
    if "leases" not in app.hooks.loaded:
        pytest.skip("a role's leasePaths are claimed by the leases plugin, not installed here")


def _held(app: App) -> list[tuple[str, str, str | None]]:
    return [(r["holder"], r["pattern"], r["claim_key"]) for r in app.store.conn.execute("SELECT * FROM leases ORDER BY id")]


async def test_the_holder_leases_the_roles_files_and_the_next_holder_gets_them(
        app: App, leases_loaded: None, run_tool: Any, repo: str, isolated_env: Path) -> None:
    got = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src", "docs/*.md"],
                                                 "leaseRoot": repo})
    assert got["ok"], got
    assert [(x["holder"], x["path"], x["reason"], x["claimKey"]) for x in got["leases"]] == [
        ("test:bob", "src", "role:builder", "role:builder"), ("test:bob", "docs/*.md", "role:builder", "role:builder")]
    assert got["role"]["leasePaths"] == ["src", "docs/*.md"] and got["role"]["leaseRoot"] == repo
    raw = json.loads(table_path(isolated_env).read_text())["roles"]["builder"]
    assert raw["leasePaths"] == ["src", "docs/*.md"] and raw["leaseRoot"] == repo
    # another session is refused, told the holder and the role
    clash = await run_tool(app, "lease_paths", {"paths": ["src/a.py"], "projectRoot": repo}, ALICE)
    [held] = clash["error"]["details"]["conflicts"]
    assert held["holder"] == "test:bob" and held["reason"] == "role:builder"
    # the role moves: its files go with it (the previous holder keeps none)
    moved = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:carol", "leaseTtlMs": 120_000})
    assert moved["ok"] and [x["holder"] for x in moved["leases"]] == ["test:carol", "test:carol"]
    assert moved["leases"][0]["expiresInMs"] <= 120_000
    assert _held(app) == [("test:carol", "src", "role:builder"), ("test:carol", "docs/*.md", "role:builder")]
    # given up: the leases end, the role still owns the paths for its next holder
    cleared = await run_tool(app, "clear_agent_role", {"role": "builder"})
    assert cleared["cleared"] and [x["path"] for x in cleared["releasedLeases"]] == ["src", "docs/*.md"]
    assert _held(app) == [] and load_table(isolated_env).roles["builder"].lease_paths == ("src", "docs/*.md")
    again = await run_tool(app, "clear_agent_role", {"role": "builder"})
    assert again["cleared"] is False and again["releasedLeases"] == []


async def test_a_clash_changes_nothing(app: App, leases_loaded: None, run_tool: Any, repo: str, isolated_env: Path) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src"], "leaseRoot": repo})
    mine = await run_tool(app, "lease_paths", {"paths": ["notes/a.md"], "projectRoot": repo, "reason": "mine"}, ALICE)
    assert mine["ok"], mine
    before = table_path(isolated_env).read_text()
    refused = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:carol", "leasePaths": ["src", "notes"],
                                                     "leaseRoot": repo})
    assert refused["error"]["code"] == "lease_conflict"
    [clash] = refused["error"]["details"]["conflicts"]
    assert (clash["holder"], clash["paths"], clash["reason"], clash["requested"]) == ("test:alice", ["notes/a.md"], "mine", ["notes"])
    assert table_path(isolated_env).read_text() == before
    assert _held(app) == [("test:bob", "src", "role:builder"), ("test:alice", "notes/a.md", None)]


async def test_empty_lease_paths_give_the_files_up(app: App, leases_loaded: None, run_tool: Any, repo: str, isolated_env: Path) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src"], "leaseRoot": repo})
    got = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": []})
    assert got["ok"] and got["leases"] is None and "leasePaths" not in got["role"]
    assert _held(app) == [] and "leasePaths" not in json.loads(table_path(isolated_env).read_text())["roles"]["builder"]


async def test_a_failed_table_write_gives_the_leases_back(app: App, leases_loaded: None, run_tool: Any, repo: str,
                                                          isolated_env: Path) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src"], "leaseRoot": repo})
    path = table_path(isolated_env)
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "version": 2}))  # read, but never written by agent-link
    failed = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:carol"})
    assert failed["error"]["code"] == "state_io_error"
    assert _held(app) == [("test:bob", "src", "role:builder")]


BAD = [
    ({"role": "orchestrator", "projectRoot": "/p", "leasePaths": ["a.py"], "leaseRoot": "/p"}, "leasePaths", "not_with_project_root"),
    ({"role": "builder", "leasePaths": ["a.py"]}, "leaseRoot", "required"),
    ({"role": "builder", "leasePaths": ["a.py"], "leaseRoot": "rel/dir"}, "leaseRoot", "absolute_path"),
    ({"role": "builder", "leaseRoot": "/p"}, "leaseRoot", "requires_lease_paths"),
]


@pytest.mark.parametrize(("args", "where", "rule"), BAD)
async def test_bad_lease_arguments(app: App, run_tool: Any, isolated_env: Path, args: dict[str, Any], where: str, rule: str) -> None:
    out = await run_tool(app, "set_agent_role", {"agent": "test:bob", **args})
    assert out["error"]["code"] == "invalid_arguments"
    assert (out["error"]["details"]["errors"][0]["path"], out["error"]["details"]["errors"][0]["rule"]) == (where, rule)
    assert not table_path(isolated_env).exists()


async def test_paths_outside_the_root_are_refused(app: App, leases_loaded: None, run_tool: Any, repo: str, isolated_env: Path) -> None:
    out = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src", "../elsewhere.py"],
                                                 "leaseRoot": repo})
    assert out["error"]["code"] == "invalid_arguments" and out["error"]["details"]["errors"][0]["path"] == "paths.1"
    missing = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src"],
                                                     "leaseRoot": repo + "-missing"})
    assert missing["error"]["code"] == "invalid_arguments" and missing["error"]["details"]["errors"][0]["path"] == "projectRoot"
    assert not table_path(isolated_env).exists() and _held(app) == []


async def test_without_the_leases_plugin(make_app: Any, run_tool: Any, repo: str, isolated_env: Path) -> None:
    app = make_app(AGENT_LINK_ROLE_ADMIN="1", AGENT_LINK_DISABLE_PLUGINS="codex claude leases")
    refused = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src"], "leaseRoot": repo})
    assert refused["error"]["code"] == "invalid_arguments"
    assert refused["error"]["details"]["errors"][0] == {"path": "leasePaths", "rule": "plugin",
                                                        "expected": "agent-link-leases installed and enabled"}
    assert not table_path(isolated_env).exists()
    # a role that owns files (written by hand, or while the plugin was on) still moves, with a warning
    table_path(isolated_env).write_text(json.dumps({"version": 1, "roles": {"builder": {"leasePaths": ["src"], "leaseRoot": repo}}}))
    call = ToolCall({}, ADMIN, [])
    moved = await app.hooks.tools()["set_agent_role"].handler(app, {"role": "builder", "agent": "test:bob"}, call)
    assert moved["leases"] is None and moved["role"]["address"] == "test:bob"
    # (test:bob never ran here: its unknown_address warning is tests/test_roles_tools.py's)
    assert [(w["code"], w["details"]) for w in call.warnings if w["code"] != "unknown_address"] == \
        [("role_paths_not_leased", {"paths": ["src"]})]
    cleared = await run_tool(app, "clear_agent_role", {"role": "builder"})
    assert cleared["cleared"] and cleared["releasedLeases"] == []


def test_unusable_lease_entries_are_problems(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    table_path(isolated_env).write_text(json.dumps({"version": 1, "roles": {
        "a": {"address": "test:bob", "leasePaths": "src", "leaseRoot": "/p"},
        "b": {"leasePaths": ["src"], "leaseRoot": "p"},
        "c": {"leasePaths": ["src"]},
        "d": {"leasePaths": ["src", "docs"], "leaseRoot": "/p/./x/.."}}}))
    table = load_table(isolated_env)
    assert [(p["path"], p["rule"]) for p in table.problems] == [
        ("roles.a.leasePaths", "type"), ("roles.b.leaseRoot", "absolute_path"), ("roles.c.leaseRoot", "absolute_path")]
    assert table.roles["a"].address == "test:bob" and table.roles["a"].lease_paths == ()
    assert (table.roles["d"].lease_paths, table.roles["d"].lease_root) == (("src", "docs"), "/p")


async def test_role_leases_over_mcp(leases_loaded: None, isolated_env: Path, repo: str) -> None:
    """Through real MCP client sessions: the admin's server assigns a role that owns files, a
    peer's edit claim is refused naming the holder, and a clashing assignment changes nothing."""
    from contextlib import AsyncExitStack

    from agent_link_testing.mcp_client import agent_link_mcp

    def env(address: str, admin: bool = False) -> dict[str, str]:
        return {"AGENT_LINK_ADDRESS": address, "AGENT_LINK_DISABLE_PLUGINS": "codex claude",
                **({"AGENT_LINK_ROLE_ADMIN": "1"} if admin else {})}

    async with AsyncExitStack() as stack:
        admin = await stack.enter_async_context(agent_link_mcp(env("test:admin", admin=True)))
        peer = await stack.enter_async_context(agent_link_mcp(env("test:peer")))
        schema = (await admin.tools())["set_agent_role"].input_schema["properties"]
        assert {"leasePaths", "leaseRoot", "leaseTtlMs"} <= set(schema)
        got = await admin.call("set_agent_role", {"role": "builder", "agent": "test:bob", "leasePaths": ["src"], "leaseRoot": repo})
        assert got["ok"] and [x["holder"] for x in got["leases"]] == ["test:bob"], got
        refused = await peer.call("lease_paths", {"paths": ["src/a.py"], "projectRoot": repo})
        assert refused["error"]["code"] == "lease_conflict"
        assert refused["error"]["details"]["conflicts"][0]["holder"] == "test:bob"
        assert (await peer.call("lease_paths", {"paths": ["docs"], "projectRoot": repo}))["ok"]
        clash = await admin.call("set_agent_role", {"role": "builder", "agent": "test:carol", "leasePaths": ["src", "docs"],
                                                    "leaseRoot": repo})
        assert clash["error"]["code"] == "lease_conflict" and clash["error"]["details"]["conflicts"][0]["holder"] == "test:peer"
        assert (await peer.call("get_agent_role", {"role": "builder"}))["role"]["address"] == "test:bob"
        cleared = await admin.call("clear_agent_role", {"role": "builder"})
        assert [x["path"] for x in cleared["releasedLeases"]] == ["src"]
        assert (await peer.call("lease_paths", {"paths": ["src/a.py"], "projectRoot": repo}))["ok"]
