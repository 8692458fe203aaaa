"""Caller identity from MCP ``_meta`` (Codex 0.169.0 shape) and the rollout transcript reader
(the holder scan needs Linux ``/proc``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_link_codex import rollouts
from agent_link_codex.harness import CodexHarness
from agent_link_codex.threads import session_from_thread

TID = "01a22a93-0000-7000-8000-000000000011"
PARENT = "01a22a93-0000-7000-8000-000000000012"
FORK = "01a22a93-0000-7000-8000-000000000013"
# What Codex 0.169.0 sends with tools/call (docs/hosts/codex.md §9).
CODEX_META = {"callId": "call_5", "threadId": TID, "sessionId": TID, "windowId": f"{TID}:0", "itemId": "fc_5", "progressToken": 1,
              "x-codex-turn-metadata": {"session_id": TID, "thread_id": TID, "turn_id": "turn-42", "model": "m"}}


def test_caller_from_meta_then_env_never_guessed() -> None:
    harness = CodexHarness()
    caller = harness.identify_caller(CODEX_META, {"CODEX_THREAD_ID": "someone-else"})
    assert caller is not None
    assert (caller.address, caller.source, caller.host, caller.turn_id, caller.tool_call_id) == (
        f"codex:{TID}", "runtime_context", "codex", "turn-42", "call_5")
    # no Codex process above this test holds the thread's transcript: named, not proved
    assert caller.evidence is None and not caller.verified
    namespaced = harness.identify_caller({"openai/codex": {"threadId": TID}}, {})
    assert namespaced is not None and namespaced.address == f"codex:{TID}"
    shell = harness.identify_caller({}, {"CODEX_THREAD_ID": TID, "CODEX_TURN_ID": "t", "CODEX_TOOL_CALL_ID": "c"})
    assert shell is not None and (shell.address, shell.source, shell.turn_id, shell.tool_call_id) == (f"codex:{TID}", "env", "t", "c")
    for meta, env in (({}, {}), ({"threadId": "a:b"}, {}), ({"threadId": "x" * 129}, {}), ({}, {"CODEX_THREAD_ID": "bad id"}),
                      ({"threadId": True}, {})):
        assert harness.identify_caller(meta, env) is None, (meta, env)


def test_summary_status_names_and_archive(tmp_path: Path, make_rollout: Callable[..., Path]) -> None:
    home = tmp_path / ".codex"
    path = make_rollout(home, TID, messages=[("user", "first ask " + "x" * 600, None), ("agent", "answer one", None),
                                             ("user", "second", "01CLIENT"), ("agent", "answer two", None)], name="old name")
    with open(home / "session_index.jsonl", "a") as fh:
        fh.write(json.dumps({"id": TID, "thread_name": "new name", "updated_at": "x"}) + "\n")
    summary = rollouts.summary(home, path)
    assert summary is not None
    assert (summary["id"], summary["name"], summary["cwd"], summary["archived"]) == (TID, "new name", "/work/project", False)
    assert summary["status"] == {"type": "idle", "source": "local-jsonl", "lastLifecycleEvent": "task_complete"}
    assert summary["lastAgentMessage"] == "answer two" and len(summary["preview"]) == rollouts.PREVIEW_CHARS
    assert rollouts.find_rollout(home, TID) == path and rollouts.find_rollout(home, PARENT) is None
    assert rollouts.client_id_seen(path, "01CLIENT") == {"type": "userMessage", "id": "u2", "clientId": "01CLIENT", "text": "second",
                                                         "turnId": "t2", "ordinal": 3}
    assert rollouts.client_id_seen(path, "01OTHER") is None
    busy = make_rollout(home, PARENT, lifecycle="task_started", archived=True)
    active = rollouts.summary(home, busy)
    assert active["status"]["type"] == "active" and active["archived"] is True
    assert rollouts.rollout_files(home, "active") == [path] and rollouts.rollout_files(home, "all") != []
    session = session_from_thread(summary, None, loaded=None)
    # read from a transcript alone: nobody is known to have it loaded, so it is not shown as pushable
    assert (session.address, session.title, session.archived, session.receive["push"]) == (f"codex:{TID}", "new name", False, None)
    assert session.loaded is False
    assert session_from_thread(active, None).receive["push"] is None


def test_fork_history_continues_the_parent(tmp_path: Path, make_rollout: Callable[..., Path]) -> None:
    home = tmp_path / ".codex"
    make_rollout(home, PARENT, messages=[("user", "p1", None), ("agent", "p2", None), ("user", "p3-after-fork", None)])
    fork = make_rollout(home, FORK, messages=[("user", "f1", None)], first_ordinal=3,
                        history_base={"thread_id": PARENT, "end_ordinal_exclusive": 3, "end_byte_offset": 0})
    texts = [i["text"] for i in rollouts.history_items(home, fork, 10)]
    assert texts == ["p1", "p2", "f1"]  # the parent's lines before the fork point, then the fork's own
    assert [i["text"] for i in rollouts.history_items(home, fork, 2)] == ["p2", "f1"]
    assert rollouts.summary(home, fork)["forkedFromId"] == PARENT


@pytest.mark.parametrize("method", ["auto", "psutil", "lsof"])
def test_holders_of_a_file(tmp_path: Path, method: str) -> None:
    """The holder check through psutil (every platform it covers) and through lsof (macOS's
    standard tool, the fallback): another process holding the file is seen by both."""
    if method == "lsof" and not any(shutil.which(p) for p in rollouts.LSOF_PATHS):
        pytest.skip("lsof is not installed here")
    target = tmp_path / "rollout.jsonl"
    target.write_text("x")
    assert rollouts.rollout_holders(str(target), set(), method=method) == []
    holder = subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); print('open', flush=True); time.sleep(60)",
                               str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        assert rollouts.rollout_holders(str(target), set(), method=method) == [holder.pid]
        assert rollouts.rollout_holders(str(target), {holder.pid}, method=method) == []
    finally:
        holder.kill()
        holder.wait()


def test_holder_check_unavailable_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither psutil nor lsof can look: None (the archive guard then refuses as unverified)."""
    import psutil

    def refuse(self: object) -> list[object]:
        raise NotImplementedError

    monkeypatch.setattr(psutil.Process, "open_files", refuse)
    monkeypatch.setattr(rollouts, "LSOF_PATHS", ("/nonexistent/lsof",))
    assert rollouts.rollout_holders(str(tmp_path / "x"), set()) is None
