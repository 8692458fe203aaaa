"""Crash, then resend (issue 18), against a REAL Codex app-server (stub Responses API).

An ``agent-link send`` killed mid-way leaves the stored message and, if it got that far, its
push claim, owned by a process that is gone. A resend of the same ``--message-id`` finishes
the job: it checks the thread for the id's echo first, so the thread gets the message exactly
once, whether the killed attempt's turn landed or not.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agent_link_codex.appserver import AppServerClient
from agent_link_codex.delivery import PushClaims
from agent_link_codex.schema import MIGRATIONS
from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.mailbox import new_message_id
from agent_link_core.model import Caller
from agent_link_core.records import OutgoingMessage
from agent_link_core.store import CORE_MIGRATIONS, Store
from agent_link_testing.codex_host import CodexAppServer
from agent_link_testing.responses_stub import ResponsesStub

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def stub() -> Iterator[ResponsesStub]:
    with ResponsesStub() as server:
        yield server


@pytest.fixture(scope="module")
def server(stub: ResponsesStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodexAppServer]:
    with CodexAppServer(stub.base_url, root=tmp_path_factory.mktemp("codex")) as running:
        yield running


async def cli(*args: str) -> Result:
    return await asyncio.to_thread(lambda: CliRunner().invoke(build_cli(), list(args), catch_exceptions=False))


def crashed_send(state_dir: Path, message_id: str, thread_id: str, body: str) -> None:
    """The row and the push claim a killed ``send`` left, the claim owned by a dead process."""
    app = App.create()
    try:
        app.mailbox.store_message(OutgoingMessage(message_id, Caller("team:me", "explicit", None), f"codex:{thread_id}",
                                                  f"codex:{thread_id}", body, "fyi", None, None))
    finally:
        app.close()
    child = subprocess.Popen(["true"])
    child.wait()
    store = Store(state_dir / "agent-link.db", (*CORE_MIGRATIONS, *MIGRATIONS))
    try:
        PushClaims(store).claim(message_id, thread_id, "ep")
        with store.write() as conn:
            conn.execute("UPDATE codex_pushes SET owner_pid = ? WHERE message_id = ?", (child.pid, message_id))
    finally:
        store.close()


async def client_ids(raw: AppServerClient, thread_id: str) -> list[str | None]:
    page = await raw.request("thread/items/list", {"threadId": thread_id, "limit": 100}, timeout_ms=WAIT_MS)
    return [e["item"].get("clientId") for e in page["data"] if e["item"]["type"] == "userMessage"]


async def run_turn(raw: AppServerClient, thread_id: str, text: str, client_id: str | None = None) -> None:
    params = {"threadId": thread_id, "input": [{"type": "text", "text": text, "text_elements": []}]}
    if client_id is not None:
        params["clientUserMessageId"] = client_id
    async with raw.subscription(thread_id=thread_id) as sub:
        await raw.request("turn/start", params, timeout_ms=WAIT_MS)
        await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)


async def test_a_resend_pushes_what_a_killed_send_left_exactly_once(server: CodexAppServer, isolated_env: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "claude roles receipts")
    monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(server.socket_path))
    raw = await AppServerClient.connect_unix(server.socket_path, refuse_server_requests=True)
    try:
        await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
        thread_id = str((await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"])
        await run_turn(raw, thread_id, "setup")

        # killed after taking the claim, before its turn request: the resend pushes it once
        never_sent = new_message_id()
        crashed_send(isolated_env, never_sent, thread_id, "the claim was taken, nothing sent")
        args = ("send", f"codex:{thread_id}", "the claim was taken, nothing sent", "--message-id", never_sent,
                "--from", "team:me", "--json")
        first = json.loads((await cli(*args)).stdout)
        assert first["outcome"] == "delivered" and first["duplicate"] is True, first
        again = json.loads((await cli(*args)).stdout)
        assert again["outcome"] == "delivered" and again["attempts"] == 0
        assert (await client_ids(raw, thread_id)).count(never_sent) == 1

        # killed after its turn request reached Codex: the echo is found, nothing is sent again
        landed = new_message_id()
        crashed_send(isolated_env, landed, thread_id, "it had landed")
        await run_turn(raw, thread_id, "it had landed", client_id=landed)  # what the killed send did
        resent = json.loads((await cli("send", f"codex:{thread_id}", "it had landed", "--message-id", landed,
                                       "--from", "team:me", "--json")).stdout)
        assert resent["outcome"] == "delivered", resent
        assert (await client_ids(raw, thread_id)).count(landed) == 1
    finally:
        await raw.close()
