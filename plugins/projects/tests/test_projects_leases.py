"""``launch_project_worker``'s ``leasePaths`` with the leases plugin (through the
``agent_link_claim_paths`` hook, never an import): the worker's files are leased for its session
before its task arrives, a clash launches nothing, and resolving the task ends the leases."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError

pytestmark = pytest.mark.anyio


@pytest.fixture
def leases_loaded(app: App) -> None:
    if "leases" not in app.hooks.loaded:
        pytest.skip("leasePaths are claimed by the leases plugin, not installed here")


@pytest.fixture
def bound(fake: Any, h: Any, tmp_path: Path) -> Path:
    fake.add(h.ORCH, "shop orchestrator")
    h.write_binding(tmp_path, h.ORCH)
    (tmp_path / "src").mkdir()
    return tmp_path


def _holders(app: App) -> list[tuple[str, str, str | None]]:
    return [(r["holder"], r["pattern"], r["until_resolved"]) for r in app.store.conn.execute("SELECT * FROM leases ORDER BY id")]


def _warned(result: dict[str, Any]) -> list[str]:
    return [w["code"] for w in result.get("warnings", [])]


def _launched(fake: Any) -> int:
    return len([n for n, _ in fake.calls if n == "launch_codex_thread"])


async def test_worker_paths_are_leased_for_it_until_its_task_is_resolved(app: App, leases_loaded: None, fake: Any, run: Any,
                                                                         h: Any, bound: Path) -> None:
    orch = h.codex_caller(h.ORCH)
    result = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "Write the exporter.",
                                                      "leasePaths": ["src/export.py", "docs/*.md"]}, orch)
    assert result["ok"], result
    worker = f"codex:{h.WORKER}"
    task = result["taskMessageId"]
    assert _holders(app) == [(worker, "src/export.py", task), (worker, "docs/*.md", task)]
    assert [(lease["holder"], lease["untilResolved"]) for lease in result["leases"]] == [(worker, task), (worker, task)]
    assert "Leased for you (exclusive, until this task message is resolved): src/export.py, docs/*.md." in result["workerPrompt"]
    # another session is told who holds it
    clash = await run(app, "lease_paths", {"paths": ["src"], "projectRoot": str(bound)}, h.ALICE)
    assert clash["error"]["code"] == "lease_conflict" and clash["error"]["details"]["conflicts"][0]["holder"] == worker
    # the worker reports and resolves its task: its leases end with it
    done = await run(app, "return_project_work_result", {"projectRoot": str(bound), "resultStatus": "done", "summary": "ok",
                                                         "replyToMessageId": task}, h.codex_caller(h.WORKER))
    assert done["ok"], done
    assert _holders(app) == []


async def test_nobody_takes_the_paths_while_the_worker_launches(app: App, leases_loaded: None, fake: Any, run: Any, h: Any,
                                                               bound: Path) -> None:
    """The paths are claimed before the launch (under a stand-in holder), so a claim made while
    the thread starts is refused, and the worker gets them with no warning."""
    seen: list[dict[str, Any]] = []

    async def alice_claims() -> None:
        seen.append(await run(app, "lease_paths", {"paths": ["src/export.py"], "projectRoot": str(bound)}, h.ALICE))

    fake.on_launch = alice_claims
    result = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": ["src"]},
                       h.codex_caller(h.ORCH))
    assert result["ok"] and "worker_paths_not_leased" not in _warned(result), result
    [refused] = seen
    assert refused["error"]["code"] == "lease_conflict"
    [held] = refused["error"]["details"]["conflicts"]
    assert held["holder"] == f"a project worker codex:{h.ORCH} is launching (task {result['taskMessageId']})"
    assert _holders(app) == [(f"codex:{h.WORKER}", "src", result["taskMessageId"])]


async def test_of_two_launches_at_once_on_the_same_paths_one_launches(app: App, leases_loaded: None, fake: Any, run: Any, h: Any,
                                                                      bound: Path) -> None:
    """The first launch waits inside its thread start until the second call has answered: the
    second is refused whole (lease_conflict) and starts no thread."""
    second_answered = asyncio.Event()

    async def first_waits() -> None:
        if fake.launched == 1:
            await asyncio.wait_for(second_answered.wait(), 30)

    fake.on_launch = first_waits
    args = {"projectRoot": str(bound), "task": "T", "leasePaths": ["src/*.py"]}

    async def second() -> dict[str, Any]:
        await asyncio.sleep(0)  # the first call goes first
        try:
            return await run(app, "launch_project_worker", {**args, "leasePaths": ["src/export.py"]}, h.codex_caller(h.ORCH))
        finally:
            second_answered.set()

    first, other = await asyncio.gather(run(app, "launch_project_worker", args, h.codex_caller(h.ORCH)), second())
    assert first["ok"] and "worker_paths_not_leased" not in _warned(first), first
    assert other["error"]["code"] == "lease_conflict", other
    assert _launched(fake) == 1
    assert _holders(app) == [(f"codex:{h.WORKER}", "src/*.py", first["taskMessageId"])]


async def test_a_failed_launch_releases_the_paths(app: App, leases_loaded: None, fake: Any, run: Any, h: Any, bound: Path) -> None:
    async def fails() -> None:
        raise AgentLinkError("upstream_error", "The Codex app-server refused to start a thread.")

    fake.on_launch = fails
    failed = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": ["src"]},
                       h.codex_caller(h.ORCH))
    assert failed["error"]["code"] == "upstream_error"
    assert _holders(app) == []
    fake.on_launch = None
    again = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": ["src"]},
                      h.codex_caller(h.ORCH))
    assert again["ok"] and _holders(app) == [(f"codex:{again['workerThreadId']}", "src", again["taskMessageId"])]


async def test_a_retry_claims_nothing_twice(app: App, leases_loaded: None, fake: Any, run: Any, h: Any, bound: Path) -> None:
    args = {"projectRoot": str(bound), "task": "T", "leasePaths": ["src"], "messageId": "01JZ0000000000000000000001"}
    first = await run(app, "launch_project_worker", args, h.codex_caller(h.ORCH))
    again = await run(app, "launch_project_worker", args, h.codex_caller(h.ORCH))
    assert first["ok"] and again["duplicate"] is True and _launched(fake) == 1
    assert _holders(app) == [(f"codex:{h.WORKER}", "src", "01JZ0000000000000000000001")]


async def test_a_clash_launches_nothing(app: App, leases_loaded: None, fake: Any, run: Any, h: Any, bound: Path) -> None:
    held = await run(app, "lease_paths", {"paths": ["src/a.py"], "projectRoot": str(bound), "reason": "mine"}, h.ALICE)
    assert held["ok"], held
    refused = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": ["src/*.py"]},
                        h.codex_caller(h.ORCH))
    conflict = refused["error"]
    assert conflict["code"] == "lease_conflict"
    [clash] = conflict["details"]["conflicts"]
    assert clash["holder"] == h.ALICE.address and clash["reason"] == "mine"
    assert clash["message"].startswith(f"a project worker codex:{h.ORCH} is launching (task ")
    assert f") needs src/*.py under {bound}" in clash["message"]
    assert _launched(fake) == 0 and app.store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert _holders(app) == [(h.ALICE.address, "src/a.py", None)]


async def test_bad_lease_paths_launch_nothing(app: App, leases_loaded: None, fake: Any, run: Any, h: Any, bound: Path) -> None:
    outside = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": ["../elsewhere.py"]})
    assert outside["error"]["code"] == "invalid_arguments" and outside["error"]["details"]["errors"][0]["path"] == "paths.0"
    empty = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": []})
    assert empty["error"]["details"]["errors"][0]["path"] == "leasePaths"
    fake.add(h.OTHER)
    rootless = await run(app, "launch_project_worker", {"orchestratorThreadId": h.OTHER, "task": "T", "leasePaths": ["a.py"]})
    assert rootless["error"]["details"]["errors"][0] == {
        "path": "leasePaths", "rule": "requires_project_root",
        "expected": "a project root (projectRoot, or one the orchestrator's binding names)"}
    assert _launched(fake) == 0 and _holders(app) == []


async def test_without_the_leases_plugin_lease_paths_are_refused(make_app: Any, fake: Any, run: Any, h: Any, bound: Path) -> None:
    app = make_app(AGENT_LINK_DISABLE_PLUGINS="codex claude leases")
    refused = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T", "leasePaths": ["src"]})
    assert refused["error"]["code"] == "invalid_arguments"
    assert refused["error"]["details"]["errors"][0] == {"path": "leasePaths", "rule": "plugin",
                                                        "expected": "agent-link-leases installed and enabled"}
    assert _launched(fake) == 0
    plain = await run(app, "launch_project_worker", {"projectRoot": str(bound), "task": "T"})
    assert plain["ok"] and "leases" not in plain and "Leased for you" not in plain["workerPrompt"]
