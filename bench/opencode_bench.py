"""opencode delivery benchmark, called by bench/run.py (`make bench`, section ``opencode``).

Measures, against the pinned real ``opencode serve`` and the stub Messages API, on one warm
server:

* ``send -> delivered``: agent-link's ``App.send`` to an idle session until it returns
  delivered (the session's ``GET /session/{id}/message`` holds the user message with the
  envelope);
* the bare baseline, in the same run on another idle session of the same server: ``POST
  /session/{id}/prompt_async`` of the same text (the envelope agent-link sent just before), then
  ``GET /session/{id}/message`` polled at the same interval as agent-link polls until that user
  message shows.

Each round waits for both turns to finish, so every measurement starts on an idle session, and
alternates which of the two goes first. Medians of :data:`ROUNDS` rounds after one warm-up.
Target: ratio <= 1.2.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

ROUNDS = 12
TURN_TIMEOUT_S = 60.0


def bench_opencode(tmp: Path) -> None:
    """Run the benchmark in ``tmp`` and print its line (see the module docstring)."""
    from agent_link_testing.hosts import HostsMissing
    from agent_link_testing.opencode_host import OpencodeHostError

    try:
        send_ms, bare_ms = asyncio.run(_measure(tmp))
    except (OpencodeHostError, HostsMissing) as exc:
        print(f"{'opencode send -> delivered':<44} skipped: {exc}")
        return
    from run import line

    line("opencode send -> delivered (warm, idle)", send_ms, "ms", "prompt_async+shown", bare_ms, "<= 1.2")


async def _measure(tmp: Path) -> tuple[float, float]:
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_testing.messages_stub import MessagesStub
    from agent_link_testing.opencode_host import OpencodeServer

    with MessagesStub(default_text="ok") as stub, \
            OpencodeServer(stub.base_url, root=tmp / "opencode-bench") as server:
        env = {**os.environ, "AGENT_LINK_STATE_DIR": str(tmp / "opencode-bench-state"), "AGENT_LINK_LOAD_PLUGINS": "opencode",
               "AGENT_LINK_OPENCODE_SERVERS": str(server.url)}
        app = App.create(env=env)
        try:
            ours = server.request("POST", "/session", {"title": "agent-link"})["id"]
            theirs = server.request("POST", "/session", {"title": "baseline"})["id"]
            sender = Caller("bench:sender", "config", "bench")
            send_ms, bare_ms = [], []
            envelope = "x" * 800  # the baseline sends text as long as agent-link's envelope
            for round_no in range(ROUNDS + 1):
                body = f"benchmark message {round_no}"
                if round_no % 2:  # alternate which goes first, so neither always runs on a warmer machine
                    bare = await asyncio.to_thread(_bare_prompt, server, theirs, f"{round_no} {envelope}")
                    elapsed, envelope = await _send(app, server, sender, ours, body)
                else:
                    elapsed, envelope = await _send(app, server, sender, ours, body)
                    bare = await asyncio.to_thread(_bare_prompt, server, theirs, f"{round_no} {envelope}")
                if round_no:  # round 0 warms both paths up
                    send_ms.append(elapsed)
                    bare_ms.append(bare)
            return statistics.median(send_ms), statistics.median(bare_ms)
        finally:
            await app.aclose()


async def _send(app: Any, server: Any, sender: Any, session_id: str, text: str) -> tuple[float, str]:
    """One ``App.send``: ``(ms until it returned delivered, the envelope)``; waits for the turn's end."""
    t0 = time.perf_counter()
    outcome = await app.send(caller=sender, to=f"opencode:{session_id}", body=text)
    elapsed = (time.perf_counter() - t0) * 1000
    assert outcome.delivery is not None and outcome.delivery.delivered, outcome.delivery
    await asyncio.to_thread(server.wait_for_reply, session_id, TURN_TIMEOUT_S)
    return elapsed, app.mailbox.envelope(app.mailbox.get_row(outcome.message["id"]))


def _bare_prompt(server: Any, session_id: str, text: str) -> float:
    """One raw ``prompt_async`` and polling until the session shows it: ms; waits for the turn's end."""
    from agent_link_opencode.delivery import CONFIRM_POLL_S

    t0 = time.perf_counter()
    server.request("POST", f"/session/{session_id}/prompt_async", {"parts": [{"type": "text", "text": text}]})
    while not any(m["info"]["role"] == "user" and any(p.get("text") == text for p in m["parts"])
                  for m in server.session_messages(session_id)):
        if time.perf_counter() - t0 > TURN_TIMEOUT_S:
            raise AssertionError("the baseline prompt never showed")
        time.sleep(CONFIRM_POLL_S)
    elapsed = (time.perf_counter() - t0) * 1000
    server.wait_for_reply(session_id, TURN_TIMEOUT_S)
    return elapsed
