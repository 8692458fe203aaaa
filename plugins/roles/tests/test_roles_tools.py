"""The six role tools, called in-process: admin gate, arguments, what they write, what they read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_roles.table import table_path

WRITES = [
    ("set_agent_role", {"role": "builder", "agent": "test:bob"}),
    ("clear_agent_role", {"role": "builder"}),
    ("set_agent_override_policy", {"target": "role:builder", "model": ["*"]}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "args"), WRITES)
async def test_writes_need_role_admin(make_app: Any, run_tool: Any, isolated_env: Path, name: str, args: dict[str, Any]) -> None:
    app = make_app()
    out = await run_tool(app, name, args)
    assert out["ok"] is False
    assert out["error"]["code"] == "permission_denied" and out["error"]["details"] == {"reason": "role_admin_disabled"}
    assert not table_path(isolated_env).exists()


@pytest.mark.anyio
async def test_admin_is_read_when_the_server_starts(make_app: Any, run_tool: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(AGENT_LINK_ROLE_ADMIN="0")
    monkeypatch.setenv("AGENT_LINK_ROLE_ADMIN", "1")  # too late: this server already started
    assert (await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"}))["error"]["code"] == "permission_denied"
    assert (await run_tool(app, "list_agent_roles", {}))["admin"] is False


def test_tool_annotations(app: App) -> None:
    tools = app.hooks.tools()
    for name, _ in WRITES:
        assert tools[name].destructive and not tools[name].read_only
    for name in ("list_agent_roles", "get_agent_role", "get_agent_override_policy"):
        assert tools[name].read_only and not tools[name].destructive


@pytest.mark.anyio
async def test_set_agent_role_writes_the_table(app: App, run_tool: Any, isolated_env: Path) -> None:
    first = await run_tool(app, "set_agent_role", {"role": "role:builder", "agent": "test:bob", "procedure": "Steps."})
    assert first["previousAddress"] is None and first["holder"] == {"address": "test:bob", "harness": "test", "title": None}
    view = first["role"]
    assert view["role"] == "builder" and view["roleAddress"] == "role:builder" and view["address"] == "test:bob"
    assert view["procedure"]["version"] == 1 and view["procedure"]["present"] and not view["procedure"]["pending"]
    raw = json.loads(table_path(isolated_env).read_text())
    assert raw["version"] == 1 and raw["roles"]["builder"]["address"] == "test:bob"
    again = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob"})
    assert again["role"]["assignedAt"] == view["assignedAt"]  # same holder: assignedAt kept
    moved = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:carol"})
    assert moved["previousAddress"] == "test:bob" and moved["role"]["assignedAt"] >= view["assignedAt"]


@pytest.mark.anyio
async def test_a_never_served_holder_is_warned_as_message_agent_warns(app: App) -> None:
    """set_agent_role to a plain address no process ever served gives the role (the holder may
    start later) with message_agent's unknown_address warning; a harness's session gets none."""
    from agent_link_core.tools import registry

    async def run_tool(app: App, name: str, args: dict[str, Any]) -> dict[str, Any]:  # the result as a client gets it
        return await registry.run_tool(app, app.hooks.tools()[name], args, {})

    out = await run_tool(app, "set_agent_role", {"role": "qa", "agent": "team:nobody"})
    [warning] = [w for w in out.get("warnings", []) if w["code"] == "unknown_address"]
    assert out["holder"]["address"] == "team:nobody" and warning["details"]["address"] == "team:nobody"
    assert "No process has ever served team:nobody; work sent to role:qa waits" in warning["message"]
    sent = await run_tool(app, "message_agent", {"to": "team:nobody", "message": "hi"})
    assert [w["code"] for w in sent.get("warnings", [])] == ["unknown_address"]
    from agent_link_presence import table

    table.record(app.store, "team:nobody", "config")  # a process served it since
    known = await run_tool(app, "set_agent_role", {"role": "qa", "agent": "team:nobody"})
    assert "unknown_address" not in [w["code"] for w in known.get("warnings", [])]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"role": "Builder", "agent": "test:bob"}, "role"),
        ({"role": "builder", "agent": "role:other"}, "agent"),
        ({"role": "builder", "agent": "test:bob", "projectRoot": "/p"}, "projectRoot"),
        ({"role": "orchestrator", "agent": "test:bob", "projectRoot": "relative"}, "projectRoot"),
        ({"role": "builder", "agent": "test:bob", "bogus": 1}, "bogus"),
    ],
)
async def test_set_agent_role_argument_errors(app: App, run_tool: Any, isolated_env: Path, args: dict[str, Any], path: str) -> None:
    out = await run_tool(app, "set_agent_role", args)
    assert out["error"]["code"] == "invalid_arguments"
    assert path in [e["path"] for e in out["error"]["details"]["errors"]]
    assert not table_path(isolated_env).exists()


@pytest.mark.anyio
async def test_oversized_procedure_is_refused_and_nothing_changes(app: App, run_tool: Any, isolated_env: Path) -> None:
    out = await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "x" * 70000})
    assert out["error"]["code"] == "body_too_large"
    assert not table_path(isolated_env).exists()


@pytest.mark.anyio
async def test_orchestrator_projects(app: App, run_tool: Any, isolated_env: Path) -> None:
    out = await run_tool(app, "set_agent_role", {"role": "orchestrator", "agent": "test:bob", "projectRoot": "/work/app/"})
    assert out["projectRoot"] == "/work/app" and out["role"]["projects"] == {"/work/app": "test:bob"}
    assert out["role"]["address"] is None  # a project assignment is not the role's own holder
    cleared = await run_tool(app, "clear_agent_role", {"role": "orchestrator", "projectRoot": "/work/app"})
    assert cleared["cleared"] and cleared["previousAddress"] == "test:bob"
    assert "projects" not in json.loads(table_path(isolated_env).read_text())["roles"]["orchestrator"]


@pytest.mark.anyio
async def test_clear_keeps_the_procedure_and_unknown_roles_are_reported(app: App, run_tool: Any) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Steps."})
    cleared = await run_tool(app, "clear_agent_role", {"role": "builder"})
    assert cleared["cleared"] and cleared["role"]["address"] is None and cleared["role"]["procedure"]["present"]
    assert (await run_tool(app, "clear_agent_role", {"role": "builder"}))["cleared"] is False
    assert (await run_tool(app, "clear_agent_role", {"role": "nobody"})) == {
        "ok": True, "cleared": False, "previousAddress": None, "role": None, "projectRoot": None,
        "path": str(table_path(Path(app.config.state_dir))), "releasedLeases": []}


@pytest.mark.anyio
async def test_list_and_get(app: App, run_tool: Any, isolated_env: Path) -> None:
    assert (await run_tool(app, "list_agent_roles", {}))["exists"] is False
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "test:bob", "procedure": "Steps <1>."})
    await run_tool(app, "set_agent_override_policy", {"target": "role:builder", "model": ["*"]})
    raw = json.loads(table_path(isolated_env).read_text())
    raw["roles"]["broken"] = {"address": 5}
    table_path(isolated_env).write_text(json.dumps(raw))
    listed = await run_tool(app, "list_agent_roles", {})
    assert [r["role"] for r in listed["roles"]] == ["broken", "builder"]
    assert listed["problems"] == [{"path": "roles.broken.address", "rule": "address", "message": listed["problems"][0]["message"]}]
    assert listed["admin"] is True and listed["exists"] is True and listed["tableError"] is None
    got = await run_tool(app, "get_agent_role", {"role": "builder", "includeProcedure": True})
    assert got["role"]["procedure"]["text"] == "Steps <1>." and got["overridePolicy"] == {"model": ["*"]}
    assert "text" not in (await run_tool(app, "get_agent_role", {"role": "builder"}))["role"]["procedure"]
    missing = await run_tool(app, "get_agent_role", {"role": "planner"})
    assert missing["error"]["code"] == "not_found" and missing["error"]["details"]["role"] == "role:planner"


@pytest.mark.anyio
async def test_read_tools_report_an_unparsable_table(app: App, run_tool: Any, isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    table_path(isolated_env).write_text("{oops")
    listed = await run_tool(app, "list_agent_roles", {})
    assert listed["ok"] and listed["roles"] == [] and listed["tableError"]["code"] == "state_io_error"
    assert (await run_tool(app, "get_agent_role", {"role": "x"}))["error"]["code"] == "state_io_error"
    assert (await run_tool(app, "get_agent_override_policy", {}))["error"]["code"] == "state_io_error"
    refused = await run_tool(app, "set_agent_role", {"role": "x", "agent": "test:bob", "procedure": "new"})
    assert refused["error"]["code"] == "state_io_error"
    assert table_path(isolated_env).read_text() == "{oops" and not (isolated_env / "roles" / "x.md").exists()
    assert app.health()["sections"]["roles"]["error"]["code"] == "state_io_error"


@pytest.mark.anyio
async def test_override_policy_set_clear_and_effective(app: App, run_tool: Any, isolated_env: Path) -> None:
    await run_tool(app, "set_agent_role", {"role": "builder", "agent": "codex:t1"})
    out = await run_tool(app, "set_agent_override_policy", {"target": "role:builder", "model": ["*", "*"], "effort": ["claude:s1"]})
    assert out["policy"] == {"model": ["*"], "effort": ["claude:s1"]}
    await run_tool(app, "set_agent_override_policy", {"target": "codex:t1", "cwd": ["role:planner"]})
    got = await run_tool(app, "get_agent_override_policy", {"target": "codex:t1"})
    assert got["policy"] == {"cwd": ["role:planner"]}
    assert got["effective"] == {"cwd": ["role:planner"], "model": ["*"], "effort": ["claude:s1"]}
    out = await run_tool(app, "set_agent_override_policy", {"target": "role:builder", "model": []})  # [] clears, effort kept
    assert out["policy"] == {"effort": ["claude:s1"]}
    out = await run_tool(app, "set_agent_override_policy", {"target": "role:builder", "effort": []})
    assert out["policy"] is None
    assert "role:builder" not in json.loads(table_path(isolated_env).read_text())["overridePolicy"]
    assert (await run_tool(app, "get_agent_override_policy", {}))["policies"] == {"codex:t1": {"cwd": ["role:planner"]}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "args",
    [{"target": "*", "model": ["*"]}, {"target": "role:builder", "model": ["nobody"]},
     {"target": "role:builder", "model": [f"test:s{i}" for i in range(51)]}, {"target": "role:builder", "temperature": []}],
)
async def test_override_policy_argument_errors(app: App, run_tool: Any, isolated_env: Path, args: dict[str, Any]) -> None:
    out = await run_tool(app, "set_agent_override_policy", args)
    assert out["error"]["code"] == "invalid_arguments"
    assert not table_path(isolated_env).exists()
