"""Codex delivery benchmark, called by bench/run.py (`make bench`).

Measures, against the pinned real Codex app-server and the stub model, on a warm connection:

* ``send -> delivered``: agent-link's ``App.send`` to an idle thread until it returns with the
  thread's userMessage echoing the message id (the evidence a delivery needs);
* the bare baseline, measured in the same run on another idle thread of the same app-server
  by a raw JSON-RPC client: ``turn/start`` of the same text (the envelope agent-link sent
  just before) with a clientUserMessageId, until that same echo arrives (and, reported beside
  it, until the ``turn/start`` response alone).

Each round waits for both turns to finish, so every measurement starts on an idle thread, and
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

ROUNDS = 30
WAIT_MS = 15_000


def bench_codex(tmp: Path) -> None:
    """Run the benchmark in ``tmp`` and print its lines (see the module docstring)."""
    from agent_link_testing.codex_host import CodexHostError

    try:
        send_ms, echo_ms, reply_ms = asyncio.run(_measure(tmp))
    except CodexHostError as exc:
        print(f"{'codex send -> delivered':<44} skipped: {exc}")
        return
    from run import line

    line("codex send -> delivered (warm, idle thread)", send_ms, "ms", "turn/start+echo", echo_ms, "<= 1.2")
    line("codex send -> delivered (vs response only)", send_ms, "ms", "turn/start reply", reply_ms, "(info)")


async def _measure(tmp: Path) -> tuple[float, float, float]:
    from agent_link_codex.appserver import AppServerClient
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_testing.codex_host import CodexAppServer
    from agent_link_testing.responses_stub import ResponsesStub

    with ResponsesStub() as stub, CodexAppServer(stub.base_url, root=tmp / "codex-bench") as host:
        env = {**os.environ, "AGENT_LINK_STATE_DIR": str(tmp / "codex-bench-state"), "CODEX_HOME": str(host.codex_home),
               "AGENT_LINK_CODEX_SOCK": str(host.socket_path), "AGENT_LINK_CODEX_AUTOSTART": "0",
               "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts"}
        app = App.create(env=env)
        harness = app.harnesses["codex"]
        raw = await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True)
        try:
            await raw.initialize("bench-baseline", "0.0.1", timeout_ms=WAIT_MS)
            [link] = await harness.service.connect(spawn=False)
            started = await link.call("thread/start", {})
            link.tracker.remember(started["thread"], subscribed=True)
            ours = started["thread"]["id"]
            theirs = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
            sender = Caller("bench:sender", "config", "bench")
            send_ms, echo_ms, reply_ms = [], [], []
            envelope = "x" * 800  # the baseline sends text as long as agent-link's envelope
            for round_no in range(ROUNDS + 1):
                body = f"benchmark message {round_no}"
                if round_no % 2:  # alternate which goes first, so neither always runs on a warmer machine
                    a, b = await _bare_turn(raw, theirs, envelope)
                    elapsed, envelope = await _send(app, link, sender, ours, body)
                else:
                    elapsed, envelope = await _send(app, link, sender, ours, body)
                    a, b = await _bare_turn(raw, theirs, envelope)
                if round_no:  # round 0 warms both paths up
                    send_ms.append(elapsed)
                    echo_ms.append(a)
                    reply_ms.append(b)
            return statistics.median(send_ms), statistics.median(echo_ms), statistics.median(reply_ms)
        finally:
            await raw.close()
            await app.aclose()


async def _send(app: Any, link: Any, sender: Any, thread_id: str, text: str) -> tuple[float, str]:
    """One ``App.send`` to the thread: ``(ms until it returned delivered, the envelope text the
    thread got)``; waits for the turn's end."""
    async with link.client.subscription(thread_id=thread_id, methods="turn/completed") as done:
        t0 = time.perf_counter()
        outcome = await app.send(caller=sender, to=f"codex:{thread_id}", body=text)
        elapsed = (time.perf_counter() - t0) * 1000
        assert outcome.delivery is not None and outcome.delivery.delivered, outcome.delivery
        await done.next(WAIT_MS)
    return elapsed, app.mailbox.envelope(app.mailbox.get_row(outcome.message["id"]))


async def _bare_turn(raw: Any, thread_id: str, text: str) -> tuple[float, float]:
    """One raw ``turn/start``: ``(ms until the echo, ms until the response)``; waits for the turn's end."""
    from ulid import ULID

    client_id = str(ULID())
    async with raw.subscription(thread_id=thread_id) as sub:
        t0 = time.perf_counter()
        await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text, "text_elements": []}],
                                         "clientUserMessageId": client_id}, timeout_ms=WAIT_MS)
        replied = (time.perf_counter() - t0) * 1000
        await sub.wait_for(lambda n: n.method in ("item/started", "item/completed") and (n.params.get("item") or {}).get("clientId") == client_id,
                           timeout_ms=WAIT_MS)
        echoed = (time.perf_counter() - t0) * 1000
        await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    return echoed, replied
