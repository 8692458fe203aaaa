"""The six tools with the fake codex tools: arguments, results, and each error they return."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.model import Caller

pytestmark = pytest.mark.anyio


@pytest.fixture
def bound(fake: Any, h: Any, tmp_path: Path) -> Path:
    """A project whose binding names a readable orchestrator thread."""
    fake.add(h.ORCH, "shop orchestrator")
    h.write_binding(tmp_path, h.ORCH)
    return tmp_path


# message_project_orchestrator ----------------------------------------------------------------
async def test_message_orchestrator_by_binding(app: Any, run: Any, h: Any, bound: Path) -> None:
    result = await run(app, "message_project_orchestrator", {"projectRoot": str(bound), "message": "status?", "anticipation": "reply",
                                                              "receipt": {"tags": ["mine"]}})
    assert result["ok"] and result["source"] == "project-orchestrator" and result["resolution"]["source"] == "binding"
    sent = result["messageResult"]
    assert sent["to"] == f"codex:{h.ORCH}" and sent["anticipation"] == "reply"
    meta = json.loads(app.mailbox.get_row(sent["messageId"])["metadata"])
    assert meta["receipt"]["tags"] == ["project-orchestrator", "shop", "mine"]
    assert meta["receipt"]["purpose"] == "project_orchestrator_message" and meta["receipt"]["cleanupRecommendation"] == "review_before_archive"


async def test_message_orchestrator_errors(app: Any, fake: Any, run: Any, h: Any) -> None:
    missing = await run(app, "message_project_orchestrator", {"query": "nobody", "message": "hi"})
    assert missing["error"]["code"] == "not_found"
    fake.answer("tie", (h.ORCH, 5), (h.OTHER, 5))
    tie = await run(app, "message_project_orchestrator", {"query": "tie", "message": "hi"})
    assert tie["error"]["code"] == "ambiguous" and len(tie["error"]["details"]["candidates"]) == 2
    bad = await run(app, "message_project_orchestrator", {"query": "x"})
    assert bad["error"]["details"]["errors"][0] == {"path": "message", "rule": "required", "expected": "non-empty string"}
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


async def test_general_role_holder_is_messaged_through_the_role_address(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path,
                                                                        isolated_env: Path, roles_loaded: bool) -> None:
    if not roles_loaded:
        pytest.skip("sending to role:orchestrator needs the roles plugin (resolution tests cover its absence)")
    fake.add(h.ORCH)
    h.write_roles(isolated_env, general=f"codex:{h.ORCH}")
    result = await run(app, "message_project_orchestrator", {"projectRoot": str(tmp_path), "message": "hi"})
    assert result["messageResult"]["to"] == f"codex:{h.ORCH}" and result["messageResult"]["via"] == "role:orchestrator"


async def test_enforcement_never_refuses_the_orchestrator_tool(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path,
                                                               isolated_env: Path, roles_loaded: bool) -> None:
    if not roles_loaded:
        pytest.skip("role enforcement is the roles plugin's")
    fake.add(h.ORCH)
    sender = h.codex_caller(h.OTHER)
    h.write_roles(isolated_env, projects={str(tmp_path): f"codex:{h.ORCH}"}, enforcement="enforce", builder=sender.address)
    direct = await run(app, "message_agent", {"to": f"codex:{h.ORCH}", "message": "hi"}, sender)
    assert direct["error"]["details"]["reason"] == "role_address_required"
    assert direct["error"]["details"]["replacement"] == {"tool": "message_project_orchestrator", "projectRoot": str(tmp_path)}
    ok = await run(app, "message_project_orchestrator", {"projectRoot": str(tmp_path), "message": "hi"}, sender)
    assert ok["ok"] and ok["resolution"]["role"]["scope"] == "project" and ok["messageResult"]["to"] == f"codex:{h.ORCH}"


# launch_project_worker ------------------------------------------------------------------------
async def test_launch_worker(app: Any, fake: Any, run: Any, h: Any, bound: Path) -> None:
    result = await run(app, "launch_project_worker", {
        "projectRoot": str(bound), "task": "Write the exporter.", "instructions": "No new dependencies.", "role": "export worker",
        "model": "gpt-x", "modelProvider": "mock", "serviceTier": "flex"}, h.codex_caller(h.ORCH))
    assert result["ok"], result
    launch = next(a for n, a in fake.calls if n == "launch_codex_thread")
    assert launch["cwd"] == str(bound) and launch["name"] == "export worker: shop" and launch["openInGui"] is False
    assert (launch["model"], launch["modelProvider"], launch["serviceTier"]) == ("gpt-x", "mock", "flex")
    row = app.mailbox.get_row(result["taskMessageId"])
    assert row["recipient"] == f"codex:{h.WORKER}" and row["anticipation"] == "action" and row["body"] == result["workerPrompt"]
    assert json.loads(row["metadata"]).get("receipt", {}).get("tags") == ["project-worker", "shop"]
    prompt = result["workerPrompt"]
    order = ["You are the export worker for project shop.", "Return path:", f"Orchestrator thread: {h.ORCH}",
             "return_project_work_result", "Codex Desktop app", "Project context:", f"Project root: {bound}", "Policy version: v3",
             "Task:\nWrite the exporter.", "Additional instructions:\nNo new dependencies."]
    assert [prompt.index(p) for p in order] == sorted(prompt.index(p) for p in order)


async def test_launch_worker_defaults_and_inert_labels(app: Any, fake: Any, run: Any, h: Any, tmp_path: Path) -> None:
    fake.add(h.ORCH)
    result = await run(app, "launch_project_worker", {"orchestratorThreadId": h.ORCH, "projectId": "shop`\n\u2028evil  id",
                                                       "task": "T"})
    prompt = result["workerPrompt"]
    assert prompt.startswith("You are the project worker for project shop evil id.\n")
    assert "Project root: not supplied" in prompt and "Policy version: v0" in prompt and "Additional instructions" not in prompt
    launch = next(a for n, a in fake.calls if n == "launch_codex_thread")
    assert "cwd" not in launch and launch["name"] == "project worker: shop evil id"


async def test_launch_worker_errors(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.ORCH)
    no_task = await run(app, "launch_project_worker", {"orchestratorThreadId": h.ORCH})
    assert no_task["error"]["details"]["errors"][0]["path"] == "task"
    effort = await run(app, "launch_project_worker", {"orchestratorThreadId": h.ORCH, "task": "T", "effort": "high"}, h.EXTERNAL)
    assert effort["error"]["details"]["errors"][0]["path"] == "effort"
    unresolved = await run(app, "launch_project_worker", {"query": "nobody", "task": "T"})
    assert unresolved["error"]["code"] == "not_found"
    assert not [n for n, _ in fake.calls if n == "launch_codex_thread"]  # nothing launched on an error


# return_project_work_result ------------------------------------------------------------------
async def _task(app: Any, run: Any, h: Any, sender: Any) -> str:
    sent = await run(app, "message_agent", {"to": f"codex:{h.WORKER}", "message": "do it", "anticipation": "action"}, sender)
    return str(sent["messageId"])


async def test_result_resolves_the_task_done_with_the_result_as_its_note(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.ORCH)
    orch = h.codex_caller(h.ORCH)
    task = await _task(app, run, h, orch)
    result = await run(app, "return_project_work_result", {
        "threadId": h.ORCH, "resultStatus": "done_with_concerns", "summary": "Mostly done.", "changedPaths": ["a.py"],
        "testsRun": ["pytest"], "blockers": [], "nextSteps": ["review"], "details": {"anything": [1, {"x": None}]},
        "replyToMessageId": task, "projectId": "shop"}, h.codex_caller(h.WORKER))
    assert result["ok"], result
    assert result["action"] == "resolved_task_done_with_result" and result["taskResolution"]["kind"] == "done"
    assert app.status(orch, task)["status"] == "done"
    heading, blank, *rest = result["message"].split("\n")
    assert (heading, blank) == ("Project worker result", "")
    payload = json.loads("\n".join(rest))
    assert list(payload) == ["status", "workerThreadId", "projectId", "projectRoot", "summary", "changedPaths", "testsRun", "blockers",
                             "nextSteps", "details", "returnedAt"]
    assert payload["status"] == "done_with_concerns" and payload["workerThreadId"] == h.WORKER and payload["projectId"] == "shop"
    note = app.mailbox.get_row(result["messageResult"]["messageId"])
    assert note["recipient"] == f"codex:{h.ORCH}" and note["body"] == result["message"]


async def test_result_to_an_orchestrator_that_did_not_send_the_task(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.ORCH)
    task = await _task(app, run, h, h.ALICE)
    result = await run(app, "return_project_work_result", {"orchestratorThreadId": h.ORCH, "resultStatus": "blocked", "result": "No key.",
                                                           "blockers": ["no API key"], "replyToMessageId": task}, h.codex_caller(h.WORKER))
    assert result["action"] == "sent_result+resolved_task_done"
    assert result["messageResult"]["to"] == f"codex:{h.ORCH}" and app.status(h.ALICE, task)["status"] == "done"
    assert json.loads(result["message"].split("\n", 2)[2])["summary"] == "No key."


async def test_result_without_a_task(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.ORCH)
    result = await run(app, "return_project_work_result", {"threadId": h.ORCH, "resultStatus": "done"}, h.codex_caller(h.WORKER))
    assert result["action"] == "sent_result" and result["result"]["summary"] == "" and result["result"]["changedPaths"] == []


async def test_result_errors(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.ORCH)
    worker = h.codex_caller(h.WORKER)
    no_status = await run(app, "return_project_work_result", {"threadId": h.ORCH}, worker)
    assert no_status["error"]["details"]["errors"][0]["path"] == "resultStatus"
    bad_status = await run(app, "return_project_work_result", {"threadId": h.ORCH, "resultStatus": "finished"}, worker)
    assert bad_status["error"]["details"]["errors"][0]["path"] == "resultStatus"
    for args in ({"status": "blocked"}, {"resultStatus": "done", "status": "done"}):  # status was removed in 0.6.0
        removed = await run(app, "return_project_work_result", {"threadId": h.ORCH, **args}, worker)
        assert removed["error"]["code"] == "invalid_arguments" and removed["error"]["details"]["errors"][0]["path"] == "status"
        assert removed["error"]["details"]["removed"] == [{"argument": "status", "replacement": "resultStatus"}]
        assert "status was replaced by resultStatus" in removed["error"]["hint"]
    unknown = await run(app, "return_project_work_result", {"threadId": h.ORCH, "resultStatus": "done",
                                                            "replyToMessageId": "01JAAAAAAAAAAAAAAAAAAAAAAA"}, worker)
    assert unknown["error"]["code"] == "not_found"
    task = await _task(app, run, h, h.ALICE)
    stranger = await run(app, "return_project_work_result", {"threadId": h.ORCH, "resultStatus": "done", "replyToMessageId": task},
                         h.codex_caller(h.OTHER))
    assert stranger["error"]["code"] == "wrong_recipient"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1  # nothing sent on an error
    await run(app, "return_project_work_result", {"threadId": h.ORCH, "resultStatus": "done", "replyToMessageId": task}, worker)
    again = await run(app, "return_project_work_result", {"threadId": h.ORCH, "resultStatus": "done", "replyToMessageId": task}, worker)
    assert again["error"]["code"] == "already_resolved"


# register_dependency_handoff --------------------------------------------------------------------
HANDOFF = {"dependencyName": "Auth API / v2!", "readinessContract": "GET /v2/token answers 200 in staging."}


async def test_handoff_to_a_thread(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.OTHER)
    result = await run(app, "register_dependency_handoff", {**HANDOFF, "targetThreadId": h.OTHER, "deadline": "Friday",
                                                            "evidenceRequirements": "a curl transcript", "context": "for the login page"},
                       h.codex_caller(h.ORCH))
    assert result["ok"], result
    assert result["receiptTags"] == ["dependency-handoff", "dependency:auth-api-v2", f"callback:{h.ORCH}"]
    assert result["dependency"]["callbackThreadId"] == h.ORCH and result["dependency"]["callbackMismatch"] is None
    assert result["target"]["kind"] == "thread" and result["target"]["threadId"] == h.OTHER
    assert result["callbackExpectation"]["requiredStatusValues"] == ["ready", "blocked"]
    text = result["message"]
    for part in (f"Codex thread {h.ORCH}", "Dependency: Auth API / v2!", "Deadline: Friday", "GET /v2/token answers 200",
                 "ready or blocked", "exact command, API or spec", "constraints", "evidence", "do not take over", "- a curl transcript",
                 "for the login page"):
        assert part in text, part
    row = app.mailbox.get_row(result["messageResult"]["messageId"])
    meta = json.loads(row["metadata"])["receipt"]
    assert meta["purpose"] == "Dependency handoff: Auth API / v2!" and meta["cleanupRecommendation"] == "keep_as_evidence"
    assert row["anticipation"] == "action"


async def test_handoff_callback_rules(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.OTHER)
    mismatch = await run(app, "register_dependency_handoff", {**HANDOFF, "targetThreadId": h.OTHER, "callbackThreadId": "elsewhere"},
                         h.codex_caller(h.ORCH))
    assert mismatch["dependency"]["callbackMismatch"]["supplied"] == "elsewhere" and mismatch["dependency"]["callbackThreadId"] == h.ORCH
    assert "supplied callback thread elsewhere" in mismatch["message"]
    supplied = await run(app, "register_dependency_handoff", {**HANDOFF, "targetThreadId": h.OTHER, "originThreadId": f"codex:{h.WORKER}"})
    assert supplied["dependency"]["callbackThreadId"] == h.WORKER and supplied["receiptTags"][2] == f"callback:{h.WORKER}"
    none = await run(app, "register_dependency_handoff", {**HANDOFF, "targetThreadId": h.OTHER})
    assert none["error"]["details"]["errors"][0]["path"] == "callbackThreadId"


async def test_handoff_targets(app: Any, fake: Any, run: Any, h: Any, bound: Path) -> None:
    me = h.codex_caller(h.WORKER)
    project = await run(app, "register_dependency_handoff", {**HANDOFF, "projectRoot": str(bound)}, me)
    assert project["target"]["kind"] == "project_orchestrator" and project["target"]["threadId"] == h.ORCH
    assert project["target"]["resolution"]["source"] == "binding"
    fake.add(h.OTHER, "auth service")
    fake.answer("auth service", (h.OTHER, 90))
    found = await run(app, "register_dependency_handoff", {**HANDOFF, "targetQuery": "auth service", "targetCwd": "/work/auth"}, me)
    assert found["target"]["kind"] == "thread_search" and found["target"]["threadId"] == h.OTHER
    assert fake.searched()[-1]["cwd"] == "/work/auth"


async def test_handoff_errors(app: Any, fake: Any, run: Any, h: Any) -> None:
    me = h.codex_caller(h.WORKER)
    nothing = await run(app, "register_dependency_handoff", HANDOFF, me)
    assert nothing["error"]["details"]["errors"][0]["path"] == "targetThreadId"
    unreadable = await run(app, "register_dependency_handoff", {**HANDOFF, "targetThreadId": h.OTHER}, me)
    assert unreadable["error"]["code"] == "not_found"
    fake.answer("auth", (h.ORCH, 5), (h.OTHER, 5))
    tie = await run(app, "register_dependency_handoff", {**HANDOFF, "targetQuery": "auth"}, me)
    assert tie["error"]["code"] == "ambiguous"
    missing = await run(app, "register_dependency_handoff", {**HANDOFF, "query": "nobody"}, me)
    assert missing["error"]["code"] == "not_found"
    no_contract = await run(app, "register_dependency_handoff", {"dependencyName": "x", "targetThreadId": h.OTHER}, me)
    assert no_contract["error"]["details"]["errors"][0]["path"] == "readinessContract"
    assert app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


async def test_message_orchestrator_can_answer_a_message(app: Any, run: Any, h: Any, bound: Path) -> None:
    question = await run(app, "message_agent", {"to": "test:bob", "message": "q", "anticipation": "reply"}, h.codex_caller(h.ORCH))
    assert question["ok"], question
    answered = await run(app, "message_project_orchestrator", {"projectRoot": str(bound), "message": "answer", "anticipation": "fyi",
                                                               "replyToMessageId": question["messageId"]},
                         Caller("test:bob", "config", "test"))
    assert answered["ok"], answered
    assert answered["messageResult"]["inReplyTo"] == question["messageId"]
    assert app.status(h.codex_caller(h.ORCH), question["messageId"])["status"] == "replied"


# retries (issue 29) ---------------------------------------------------------------------------
def _count(app: Any) -> int:
    return int(app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])


async def test_every_send_tool_takes_the_idempotency_key(app: Any, fake: Any, run: Any, h: Any, bound: Path) -> None:
    """A model that retries a project tool after a host timeout gives the same messageId: the
    retry returns the first message (duplicate), launches no second worker and sends nothing
    new; other content under the key is refused naming what differs."""
    tools = app.hooks.tools()
    for name in ("message_project_orchestrator", "launch_project_worker", "return_project_work_result", "register_dependency_handoff"):
        assert "messageId" in tools[name].input_schema["properties"], name
    orch, worker = h.codex_caller(h.ORCH), h.codex_caller(h.WORKER)
    ask = {"projectRoot": str(bound), "message": "status?", "anticipation": "reply", "messageId": "01J00000000000000000000001"}
    first = await run(app, "message_project_orchestrator", ask)
    again = await run(app, "message_project_orchestrator", ask)
    assert again["messageResult"]["duplicate"] is True and again["messageResult"]["messageId"] == first["messageResult"]["messageId"]
    changed = await run(app, "message_project_orchestrator", {**ask, "message": "status now?"})
    assert changed["error"]["details"]["differs"] == ["message"]

    launch = {"projectRoot": str(bound), "task": "Write the exporter.", "messageId": "01J00000000000000000000002"}
    launched = await run(app, "launch_project_worker", launch, orch)
    relaunched = await run(app, "launch_project_worker", launch, orch)
    assert relaunched["ok"] and relaunched["duplicate"] is True and relaunched["workerThreadId"] == launched["workerThreadId"]
    assert len([n for n, _ in fake.calls if n == "launch_codex_thread"]) == 1
    other_task = await run(app, "launch_project_worker", {**launch, "task": "Write the importer."}, orch)
    assert other_task["error"]["details"]["differs"] == ["message"]

    done = {"threadId": h.ORCH, "resultStatus": "done", "replyToMessageId": launched["taskMessageId"],
            "messageId": "01J00000000000000000000003"}
    returned = await run(app, "return_project_work_result", done, worker)
    retried = await run(app, "return_project_work_result", done, worker)
    assert returned["ok"] and retried["ok"], retried
    assert retried["messageResult"]["duplicate"] is True and retried["message"] == returned["message"]

    handoff = {**HANDOFF, "targetThreadId": h.ORCH, "messageId": "01J00000000000000000000004"}
    sent = await run(app, "register_dependency_handoff", handoff, worker)
    resent = await run(app, "register_dependency_handoff", handoff, worker)
    assert resent["messageResult"]["duplicate"] is True and resent["messageResult"]["messageId"] == sent["messageResult"]["messageId"]
    assert _count(app) == 4
