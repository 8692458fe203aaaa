"""What a Codex thread is doing, read for the waits: its status and last turn, from the
app-server that has it or from its rollout transcript (``wait_for_codex_thread``, and
``wait_for_agent`` through the harness's ``activity_check``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_link_core.errors import AgentLinkError

from agent_link_codex import rollouts
from agent_link_codex.settings import codex_home

if TYPE_CHECKING:
    from agent_link_codex.harness import CodexHarness
    from agent_link_codex.service import Link


async def thread_links(harness: CodexHarness, use_fallback: bool) -> tuple[list[Link], dict[str, Any] | None]:
    """The live app-server links and the error that left some out (as a dict), for the tools.

    :raises AgentLinkError: ``codex_unavailable`` when none can be had and ``use_fallback`` is false.
    """
    links, error = await harness.links_or_error()
    if not links and (error is not None and not use_fallback):
        raise error
    return links, error.to_dict() if error is not None else None


def thread_activity(harness: CodexHarness, tid: str) -> Any:
    """A poll-by-poll check for wait_for_agent: ``{"outcome": "turn_completed"|"idle",
    "turn": {turnId, status, completedAt}}`` once the thread's turn is over (never the turn's
    text: that is not an answer), None while a turn runs or the status is unknown."""
    state: dict[str, Any] = {"links": None, "active": False}

    async def check() -> dict[str, Any] | None:
        if state["links"] is None:
            state["links"], _ = await thread_links(harness, True)
        status, turn, _ = await _thread_state(harness, state["links"], tid)
        if status == "active":
            state["active"] = True
            return None
        if status is None:
            return None
        brief = {k: (turn or {}).get(k) for k in ("turnId", "status", "completedAt")}
        return {"outcome": "turn_completed" if state["active"] else "idle", "turn": brief}

    return check


async def _thread_state(harness: CodexHarness, links: list[Link], tid: str) -> tuple[str | None, dict[str, Any] | None, str]:
    """``(status, last turn, source)``; status None while unknown (rollout without lifecycle)."""
    observed = await observe(harness, links, tid)
    return observed["status"], observed["turn"], observed["source"]


async def observe(harness: CodexHarness, links: list[Link], tid: str) -> dict[str, Any]:
    """One read of a thread for the waits: ``status`` (None while unknown: a rollout without
    lifecycle events), ``turn`` (the last turn: ``turnId``, ``status``, ``completedAt``,
    ``finalResponse``), ``source``, ``thread`` (the raw thread or rollout summary), ``link``
    (the app-server read from, or None), ``loaded_on`` (the link that has it loaded) and
    ``path`` (the rollout, transcript reads only).

    :raises AgentLinkError: ``not_found`` when no app-server or transcript knows the thread.
    """
    if links:
        location = await harness.service.locate(tid, links, fresh=True)
        if location is None:
            raise AgentLinkError("not_found", f"No Codex thread {tid} is known.", {"id": tid, "candidates": []})
        link = location.link or location.readers[0]
        page = await link.call("thread/turns/list", {"threadId": tid, "limit": 1, "itemsView": "full"})
        turns = page.get("data") or []
        turn = None
        if turns:
            last = turns[0]
            texts = [i.get("text") for i in last.get("items") or [] if i.get("type") == "agentMessage"]
            last_status = last.get("status")
            if last_status == "interrupted" and location.status == "active":
                last_status = "inProgress"  # a just-started turn is listed interrupted for a moment (docs/hosts/codex.md §6)
            turn = {"turnId": last.get("id"), "status": last_status, "completedAt": last.get("completedAt"),
                    "finalResponse": texts[-1] if texts and last_status != "inProgress" else None}
        status = location.status
        if status == "notLoaded":
            status = "idle" if not turns or turns[0].get("status") != "inProgress" else "active"
        thread = {**location.thread, "archived": True} if location.archived else location.thread
        return {"status": status, "turn": turn, "source": "app-server", "thread": thread, "link": link,
                "loaded_on": location.link, "path": None}
    home = codex_home(harness.env)
    path = rollouts.find_rollout(home, tid)
    summary = rollouts.summary(home, path) if path is not None else None
    if summary is None:
        raise AgentLinkError("not_found", f"No Codex thread {tid} is known.", {"id": tid, "candidates": []})
    status = summary["status"]["type"]
    turn = {"turnId": None, "status": None, "completedAt": None, "finalResponse": summary.get("lastAgentMessage") if status == "idle" else None}
    return {"status": None if status == "unknown" else status, "turn": turn, "source": "local-jsonl-fallback", "thread": summary,
            "link": None, "loaded_on": None, "path": path}
