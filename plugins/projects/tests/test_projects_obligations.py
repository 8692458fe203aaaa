"""check_coordination_obligations: the analysis, and which handoff receipts satisfy it."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.anyio

COMMITS = "I'm blocked on the auth agent until it publishes the token endpoint."


async def check(run: Any, app: Any, caller: Any = None, **args: Any) -> dict[str, Any]:
    return await (run(app, "check_coordination_obligations", args, caller) if caller else run(app, "check_coordination_obligations", args))


async def handoff(run: Any, app: Any, h: Any, target: str, name: str = "token endpoint", turn: str = "turn-1") -> dict[str, Any]:
    result = await run(app, "register_dependency_handoff", {"dependencyName": name, "readinessContract": "200 from /token",
                                                           "targetThreadId": target}, h.codex_caller(h.ORCH, turn))
    assert result["ok"], result
    return result


async def test_no_obligation_is_not_applicable(app: Any, run: Any) -> None:
    result = await check(run, app, text="The callback fires after the HTTP request completes.", originThreadId="t1")
    assert result["status"] == "not_applicable" and result["analysis"]["hasObligation"] is False
    assert result["nextRequiredAction"] is None


async def test_obligation_without_origin_is_blocked(app: Any, run: Any) -> None:
    result = await check(run, app, finalText=COMMITS)
    assert result["status"] == "blocked" and result["blocker"] and result["nextRequiredAction"]["arguments"] == {"originThreadId": "<your thread id>"}


async def test_needs_handoff_then_satisfied_by_dependency_name(app: Any, fake: Any, run: Any, h: Any, receipts_loaded: bool) -> None:
    fake.add(h.OTHER)
    before = await check(run, app, text=COMMITS, originThreadId=h.ORCH, dependencyName="Token endpoint")
    assert before["status"] == "needs_handoff"
    assert before["nextRequiredAction"]["tool"] == "register_dependency_handoff"
    assert before["nextRequiredAction"]["arguments"]["dependencyName"] == "Token endpoint"
    await handoff(run, app, h, h.OTHER)
    after = await check(run, app, text=COMMITS, originThreadId=h.ORCH, dependencyName="Token endpoint")
    if not receipts_loaded:
        assert after["status"] == "needs_handoff" and after["satisfaction"]["receiptsAvailable"] is False
        assert any(w["code"] == "receipts_unavailable" for w in after["warnings"])
        return
    assert after["status"] == "satisfied" and after["satisfaction"]["matchedHandoffs"] == 1
    assert after["receipts"][0]["tags"][:2] == ["dependency-handoff", "dependency:token-endpoint"]
    other = await check(run, app, text=COMMITS, originThreadId=h.ORCH, dependencyName="something else")
    assert other["status"] == "needs_handoff"


async def test_named_thread_ids_must_be_the_target(app: Any, fake: Any, run: Any, h: Any, receipts_loaded: bool) -> None:
    fake.add(h.OTHER)
    fake.add(h.WORKER)
    await handoff(run, app, h, h.WORKER)
    text = f"I'll wait for thread {h.OTHER} to report that the schema is ready."
    wrong = await check(run, app, text=text, originThreadId=h.ORCH, dependencyName="token endpoint")
    assert wrong["status"] == "needs_handoff"  # the tag matches, but the named thread is not the target
    assert wrong["nextRequiredAction"]["arguments"]["targetThreadId"] == h.OTHER.lower()
    await handoff(run, app, h, h.OTHER, name="schema")
    right = await check(run, app, text=text, originThreadId=h.ORCH)
    assert right["status"] == ("satisfied" if receipts_loaded else "needs_handoff")


async def test_origin_turn_and_since(app: Any, fake: Any, run: Any, h: Any, receipts_loaded: bool) -> None:
    fake.add(h.OTHER)
    await handoff(run, app, h, h.OTHER, turn="turn-7")
    nothing = await check(run, app, text=COMMITS, originThreadId=h.ORCH)
    assert nothing["status"] == "needs_handoff"  # no name, no turn, no since: nothing satisfies
    expected = "satisfied" if receipts_loaded else "needs_handoff"
    by_turn = await check(run, app, text=COMMITS, originThreadId=h.ORCH, originTurnId="turn-7")
    assert by_turn["status"] == expected
    # the caller's own turn is the default
    own = await check(run, app, h.codex_caller(h.ORCH, "turn-7"), text=COMMITS)
    assert own["status"] == expected and own["originThreadId"] == h.ORCH and own["originTurnId"] == "turn-7"
    other_turn = await check(run, app, h.codex_caller(h.ORCH, "turn-8"), text=COMMITS)
    assert other_turn["status"] == "needs_handoff"
    since = await check(run, app, text=COMMITS, originThreadId=h.ORCH, since="2000-01-01T00:00:00Z")
    assert since["status"] == expected
    future = await check(run, app, text=COMMITS, originThreadId=h.ORCH, since="2999-01-01T00:00:00Z")
    assert future["status"] == "needs_handoff"


async def test_another_origins_handoff_does_not_count(app: Any, fake: Any, run: Any, h: Any) -> None:
    fake.add(h.OTHER)
    await handoff(run, app, h, h.OTHER)
    result = await check(run, app, text=COMMITS, originThreadId=h.WORKER, dependencyName="token endpoint")
    assert result["status"] == "needs_handoff"


async def test_receipt_limit(app: Any, fake: Any, run: Any, h: Any, receipts_loaded: bool) -> None:
    fake.add(h.OTHER)
    await handoff(run, app, h, h.OTHER)
    result = await check(run, app, text=COMMITS, originThreadId=h.ORCH, dependencyName="token endpoint", receiptLimit=0)
    assert result["receipts"] == [] and result["status"] == ("satisfied" if receipts_loaded else "needs_handoff")


async def test_errors(app: Any, run: Any) -> None:
    none = await check(run, app, originThreadId="t")
    assert none["error"]["details"]["errors"][0]["rule"] == "required"
    two = await check(run, app, text="a", finalText="b")
    assert two["error"]["details"]["errors"][0]["rule"] == "one_of"
    since = await check(run, app, text=COMMITS, originThreadId="t", since="yesterday")
    assert since["error"]["details"]["errors"][0]["path"] == "since"
    limit = await check(run, app, text="a", receiptLimit=101)
    assert limit["error"]["details"]["errors"][0]["path"] == "receiptLimit"


async def test_without_the_receipts_plugin_nothing_can_be_verified(make_app: Any, fake: Any, run: Any, h: Any) -> None:
    app = make_app(AGENT_LINK_DISABLE_PLUGINS="codex claude receipts")
    fake.add(h.OTHER)
    await handoff(run, app, h, h.OTHER)
    result = await check(run, app, text=COMMITS, originThreadId=h.ORCH, dependencyName="token endpoint")
    assert result["status"] == "needs_handoff" and result["satisfaction"]["receiptsAvailable"] is False
    assert [w["code"] for w in result["warnings"]] == ["receipts_unavailable"]
