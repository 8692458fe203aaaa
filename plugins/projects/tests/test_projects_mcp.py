"""The six tools through a real MCP client session (``agent-link mcp`` in a subprocess, the
real codex plugin loaded with no app-server reachable): schemas, annotations, results that
validate against the declared output schemas, and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.mcp_client import agent_link_mcp
from jsonschema import Draft202012Validator

pytestmark = pytest.mark.anyio

TOOLS = {"resolve_project_orchestrator": True, "message_project_orchestrator": False, "launch_project_worker": False,
         "return_project_work_result": False, "register_dependency_handoff": False, "check_coordination_obligations": True}
ENV = {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_DISABLE_PLUGINS": "claude", "AGENT_LINK_CODEX_AUTOSTART": "0"}


async def test_schemas_and_annotations() -> None:
    async with agent_link_mcp(ENV) as client:
        tools = await client.tools()
        for name, read_only in TOOLS.items():
            tool = tools[name]
            assert tool.annotations.read_only_hint is read_only and tool.annotations.open_world_hint is False
            assert tool.input_schema["additionalProperties"] is False and tool.output_schema["additionalProperties"] is False
            Draft202012Validator.check_schema(tool.input_schema)
            Draft202012Validator.check_schema(tool.output_schema)
        assert tools["launch_project_worker"].input_schema["required"] == ["task"]
        lease_paths = tools["launch_project_worker"].input_schema["properties"]["leasePaths"]
        assert lease_paths["type"] == "array" and lease_paths["minItems"] == 1 and lease_paths["items"]["type"] == "string"
        assert "leases" in tools["launch_project_worker"].output_schema["properties"]
        assert tools["register_dependency_handoff"].input_schema["required"] == ["dependencyName", "readinessContract"]
        # the one free-form object: a worker's details
        assert "additionalProperties" not in tools["return_project_work_result"].input_schema["properties"]["details"]
        assert tools["return_project_work_result"].input_schema["properties"]["resultStatus"]["enum"] == ["done", "done_with_concerns", "blocked"]


async def test_calls_and_errors_over_mcp(tmp_path: Path, h: Any) -> None:
    async with agent_link_mcp(ENV) as client:
        tools = await client.tools()

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            result = await client.call(name, args)
            Draft202012Validator(tools[name].output_schema).validate(result)
            return result

        checked = await call("check_coordination_obligations", {"text": "Waiting on the docs agent to confirm the names.",
                                                                 "originThreadId": h.ORCH, "dependencyName": "names"})
        assert checked["status"] == "needs_handoff" and checked["analysis"]["hasObligation"] is True
        quiet = await call("check_coordination_obligations", {"text": "All tests pass."})
        assert quiet["status"] == "not_applicable"
        h.write_binding(tmp_path, h.ORCH, role="boss")
        invalid = await call("resolve_project_orchestrator", {"projectRoot": str(tmp_path)})
        assert invalid["error"]["details"]["errors"][0]["path"] == "binding.role"
        unknown = await call("resolve_project_orchestrator", {"orchestratorThreadId": h.ORCH})
        assert unknown["error"]["code"] == "not_found"
        nothing = await call("resolve_project_orchestrator", {"query": "shop orchestrator"})
        assert nothing["ok"] and nothing["status"] == "not_found" and nothing["listSource"] == "local-jsonl-fallback"
        for name, args, path in (
            ("message_project_orchestrator", {"query": "x"}, "message"),
            ("launch_project_worker", {"query": "x"}, "task"),
            ("launch_project_worker", {"query": "x", "task": "T", "leasePaths": []}, "leasePaths"),
            ("return_project_work_result", {"threadId": h.ORCH, "resultStatus": "maybe"}, "resultStatus"),
            ("register_dependency_handoff", {"dependencyName": "d", "readinessContract": "r", "callbackThreadId": h.ORCH}, "targetThreadId"),
            ("check_coordination_obligations", {"text": "x", "bogus": 1}, "bogus"),
        ):
            refused = await call(name, args)
            assert refused["error"]["code"] == "invalid_arguments" and refused["error"]["details"]["errors"][0]["path"] == path, refused
        health = await call("agent_link_health", {})
        section = health["sections"]["projects"]
        assert section["codex"] is True and section["receipts"] is True
        assert json.dumps(section)  # plain JSON
