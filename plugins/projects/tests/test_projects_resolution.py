"""The orchestrator resolution order: one test per step, per tie and per invalid case.

Role steps need the roles plugin; when it is not installed (this suite also runs that way)
the same tests check that those steps are skipped and the result says roles are unavailable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def resolve(run: Any, app: Any, **args: Any) -> dict[str, Any]:
    return await run(app, "resolve_project_orchestrator", args)


def _roles_note(result: dict[str, Any]) -> bool:
    return result["rolesAvailable"] is False and any(w["code"] == "roles_unavailable" for w in result.get("warnings", []))


# 1. explicit -------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["{}", "codex:{}"])
@pytest.mark.parametrize("key", ["orchestratorThreadId", "threadId"])
async def test_step1_explicit_thread(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path, form: str, key: str) -> None:
    fake.add(h.ORCH, "orchestrator")
    h.write_binding(tmp_path, h.OTHER)  # explicit beats everything, even a binding
    result = await resolve(run, app, **{key: form.format(h.ORCH), "projectRoot": str(tmp_path)})
    assert (result["status"], result["source"], result["threadId"], result["role"]) == ("resolved", "explicit", h.ORCH, None)
    assert result["verification"]["readable"] is True and result["address"] == f"codex:{h.ORCH}"


async def test_step1_explicit_thread_that_cannot_be_read(app: Any, run: Any, h: Any) -> None:
    result = await resolve(run, app, orchestratorThreadId=h.ORCH)
    assert result["ok"] is False and result["error"]["code"] == "not_found" and result["error"]["details"]["id"] == h.ORCH


async def test_step1_explicit_malformed_id(app: Any, run: Any) -> None:
    result = await resolve(run, app, orchestratorThreadId="not a/thread")
    assert result["error"]["code"] == "invalid_arguments" and result["error"]["details"]["errors"][0]["path"] == "orchestratorThreadId"


async def test_step1_explicit_role(app: Any, fake: Any, run: Any, h: Any, isolated_env: Path, roles_loaded: bool) -> None:
    fake.add(h.ORCH)
    h.write_roles(isolated_env, planner=f"codex:{h.ORCH}")
    result = await resolve(run, app, orchestratorThreadId="role:planner")
    if not roles_loaded:
        assert result["error"]["code"] == "unsupported" and result["error"]["details"]["capability"] == "roles"
        return
    assert (result["source"], result["threadId"]) == ("explicit", h.ORCH)
    assert result["role"] == {"name": "planner", "via": "role:planner", "address": f"codex:{h.ORCH}", "scope": "role", "projectRoot": None}


async def test_step1_explicit_role_held_by_a_non_codex_session(app: Any, run: Any, isolated_env: Path, h: Any, roles_loaded: bool) -> None:
    h.write_roles(isolated_env, planner="claude:abc")
    result = await resolve(run, app, orchestratorThreadId="role:planner")
    assert result["error"]["code"] == ("not_found" if roles_loaded else "unsupported")


async def test_step1_explicit_role_nobody_holds(app: Any, run: Any, roles_loaded: bool) -> None:
    result = await resolve(run, app, orchestratorThreadId="role:planner")
    assert result["error"]["code"] == ("not_found" if roles_loaded else "unsupported")


# 2. the orchestrator role for this project -------------------------------------------------
async def test_step2_project_role_assignment(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path, isolated_env: Path,
                                             roles_loaded: bool) -> None:
    fake.add(h.ORCH)
    fake.add(h.OTHER)
    h.write_binding(tmp_path, h.OTHER)  # the assignment comes before the binding
    h.write_roles(isolated_env, projects={str(tmp_path): f"codex:{h.ORCH}"})
    result = await resolve(run, app, projectRoot=str(tmp_path) + "/", projectId="mine")
    if not roles_loaded:
        assert _roles_note(result) and (result["source"], result["threadId"]) == ("binding", h.OTHER)
        return
    assert (result["source"], result["threadId"]) == ("role", h.ORCH)
    assert result["role"] == {"name": "orchestrator", "via": "role:orchestrator", "address": f"codex:{h.ORCH}", "scope": "project",
                              "projectRoot": str(tmp_path)}
    assert result["projectId"] == "mine" and result["binding"] is None  # a role decision carries no binding projectId


async def test_step2_assignment_of_another_project_does_not_count(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path,
                                                                  isolated_env: Path) -> None:
    fake.add(h.ORCH)
    (tmp_path / "sub").mkdir()
    h.write_roles(isolated_env, projects={str(tmp_path): f"codex:{h.ORCH}"})
    fake.answer("sub project orchestrator")
    result = await resolve(run, app, projectRoot=str(tmp_path / "sub"))  # no subdirectory matching
    assert result["source"] == "search" and result["status"] == "not_found"


@pytest.mark.parametrize("holder", ["claude:abc", "codex:unreadable-thread"])
async def test_step2_unusable_holder_is_passed_over(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path, isolated_env: Path,
                                                    holder: str, roles_loaded: bool) -> None:
    fake.add(h.OTHER)
    h.write_binding(tmp_path, h.OTHER)
    h.write_roles(isolated_env, projects={str(tmp_path): holder})
    result = await resolve(run, app, projectRoot=str(tmp_path))
    assert (result["source"], result["threadId"]) == ("binding", h.OTHER)
    if roles_loaded:
        reason = "not_a_codex_thread" if holder.startswith("claude:") else "unreadable"
        assert result["passedOver"] == [{"step": "project-role", "address": holder, "reason": reason}]


# 3. the binding file -----------------------------------------------------------------------
async def test_step3_binding(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path) -> None:
    fake.add(h.ORCH)
    h.write_binding(tmp_path, h.ORCH)
    result = await resolve(run, app, projectRoot=str(tmp_path), projectId="ignored")
    assert (result["source"], result["threadId"], result["projectId"]) == ("binding", h.ORCH, "shop")
    assert result["binding"]["policyVersion"] == "v3" and result["bindingVerification"]["readable"] is True


async def test_step3_binding_thread_unreadable_falls_to_search_never_a_role(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path,
                                                                             isolated_env: Path) -> None:
    fake.add(h.OTHER, "shop project orchestrator")
    h.write_binding(tmp_path, h.ORCH)  # h.ORCH cannot be read
    h.write_roles(isolated_env, general=f"codex:{h.OTHER}")
    fake.answer("project orchestrator shop", (h.OTHER, 300))
    result = await resolve(run, app, projectRoot=str(tmp_path))
    assert (result["source"], result["status"], result["threadId"], result["role"]) == ("binding-unreadable-search", "resolved", h.OTHER, None)
    assert result["bindingVerification"]["readable"] is False and result["projectId"] == "shop"
    assert fake.searched()[-1]["cwd"] == str(tmp_path) and fake.searched()[-1]["archiveScope"] == "all"


async def test_step3_invalid_binding_is_an_error_not_a_search(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path) -> None:
    h.write_binding(tmp_path, h.ORCH, role="boss")
    result = await resolve(run, app, projectRoot=str(tmp_path), query="anything")
    assert result["error"]["code"] == "invalid_arguments" and result["error"]["details"]["errors"][0]["path"] == "binding.role"
    assert fake.searched() == []


# 4. the orchestrator role's general holder -----------------------------------------------
async def test_step4_general_holder_with_project_root_and_no_binding(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path,
                                                                     isolated_env: Path, roles_loaded: bool) -> None:
    fake.add(h.ORCH)
    h.write_roles(isolated_env, general=f"codex:{h.ORCH}")
    fake.answer(f"{tmp_path.name} project orchestrator")
    result = await resolve(run, app, projectRoot=str(tmp_path))
    if not roles_loaded:
        assert _roles_note(result) and result["source"] == "search"
        return
    assert (result["source"], result["threadId"]) == ("role", h.ORCH)
    assert result["role"] == {"name": "orchestrator", "via": "role:orchestrator", "address": f"codex:{h.ORCH}", "scope": "role", "projectRoot": None}


async def test_step4_not_used_when_a_binding_exists(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path, isolated_env: Path) -> None:
    fake.add(h.ORCH)
    fake.add(h.OTHER)
    h.write_binding(tmp_path, h.OTHER)
    h.write_roles(isolated_env, general=f"codex:{h.ORCH}")
    result = await resolve(run, app, projectRoot=str(tmp_path))
    assert (result["source"], result["threadId"]) == ("binding", h.OTHER)


async def test_step4_never_without_project_root(app: Any, fake: Any, run: Any, h: Any, isolated_env: Path) -> None:
    fake.add(h.ORCH)
    h.write_roles(isolated_env, general=f"codex:{h.ORCH}")
    result = await resolve(run, app, query="orchestrator")  # a query alone never picks the role holder
    assert (result["source"], result["status"], result["role"]) == ("search", "not_found", None)


# 5. ranked search ------------------------------------------------------------------------------
async def test_step5_search_with_the_given_query(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.ORCH, "shop orchestrator")
    fake.answer("shop orchestrator", (h.ORCH, 400), (h.OTHER, 100))
    result = await resolve(run, app, query="shop orchestrator", cwd="/work/shop", limit=5)
    assert (result["source"], result["status"], result["threadId"]) == ("search", "resolved", h.ORCH)
    assert result["selection"]["topScore"] == 400 and result["selection"]["ambiguous"] is False
    assert fake.searched()[-1] == {"query": "shop orchestrator", "limit": 5, "archiveScope": "all", "useLocalFallback": True,
                                   "cwd": "/work/shop"}


async def test_step5_query_from_project_id(app: Any, fake: Any, run: Any) -> None:
    result = await resolve(run, app, projectId="shop")
    assert result["query"] == "project orchestrator shop" and "cwd" not in fake.searched()[-1]


async def test_step5_query_from_the_root_folder_name(app: Any, fake: Any, run: Any, tmp_path: Path, roles_loaded: bool) -> None:
    result = await resolve(run, app, projectRoot=str(tmp_path))
    assert result["query"] == f"{tmp_path.name} project orchestrator" and fake.searched()[-1]["cwd"] == str(tmp_path)


async def test_step5_tie_at_the_top_is_ambiguous(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.answer("orchestrator", (h.ORCH, 200), (h.OTHER, 200), (h.WORKER, 50))
    result = await resolve(run, app, query="orchestrator")
    assert (result["status"], result["threadId"]) == ("ambiguous", None)
    assert result["selection"]["tiedCandidateIds"] == [h.ORCH, h.OTHER] and result["selection"]["tiedCandidateCount"] == 2


async def test_step5_nothing_found_is_a_verdict(app: Any, run: Any) -> None:
    result = await resolve(run, app, query="nobody")
    assert result["ok"] is True and result["status"] == "not_found"


async def test_nothing_to_resolve_with(app: Any, run: Any) -> None:
    result = await resolve(run, app)
    assert result["error"]["code"] == "invalid_arguments"


async def test_limit_is_checked(app: Any, run: Any) -> None:
    result = await resolve(run, app, query="x", limit=51)
    assert result["error"]["details"]["errors"][0]["path"] == "limit"


async def test_step1_explicit_role_whose_thread_cannot_be_read(app: Any, run: Any, h: Any, isolated_env: Path, roles_loaded: bool) -> None:
    h.write_roles(isolated_env, planner=f"codex:{h.ORCH}")  # the fake cannot read h.ORCH
    result = await resolve(run, app, orchestratorThreadId="role:planner")
    assert result["error"]["code"] == ("not_found" if roles_loaded else "unsupported")


async def test_unreadable_roles_table(app: Any, run: Any, tmp_path: Path, isolated_env: Path, roles_loaded: bool) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "roles.json").write_text("{not json")
    result = await resolve(run, app, projectRoot=str(tmp_path))
    if roles_loaded:
        assert result["error"]["code"] == "state_io_error"
    else:
        assert result["ok"] and result["source"] == "search"


@pytest.mark.parametrize("tool,args", [
    ("resolve_project_orchestrator", {"query": "x"}),
    ("launch_project_worker", {"orchestratorThreadId": "t1", "task": "T"}),
    ("register_dependency_handoff", {"dependencyName": "d", "readinessContract": "r", "targetThreadId": "t1", "callbackThreadId": "t2"}),
])
async def test_without_the_codex_plugin(make_app: Any, monkeypatch: pytest.MonkeyPatch, run: Any, tool: str, args: dict[str, Any]) -> None:
    from agent_link_core.app import App

    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
    app = App.create()  # no fake either: nothing registers the codex tools
    try:
        result = await run(app, tool, args)
        assert result["error"]["code"] == "unsupported" and "codex" in result["error"]["hint"]
        section = app.health()["sections"]["projects"]
        assert section["codex"] is False and any("codex plugin" in line for line in section["limitations"])
    finally:
        app.close()
