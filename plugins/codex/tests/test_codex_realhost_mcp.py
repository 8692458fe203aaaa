"""agent-link inside REAL Codex (pinned): as the thread's MCP server, through the
prompt hook, and as the owner of a private app-server.

* The stub model of a Codex thread calls agent-link's ``reply_agent_link_message`` (agent-link
  configured as an MCP server in that CODEX_HOME with tools approved); the MCP server knows
  the calling thread from the tool call's ``_meta`` only, resolves the message, and the
  sender's wait returns the reply.
* The shipped prompt hook (``hooks/codex-hooks.json``, run through ``hooks/agent-link.sh``),
  trusted through the app-server's config API, puts the pending-mail note before the model;
  health reads its trust from ``hooks/list``.
* ``agent-link mcp`` starts a private app-server when none is reachable and leaves none behind
  when its client closes stdin or it gets SIGTERM; one whose owner was SIGKILLed is reaped by
  the next owner; an idle one stops after AGENT_LINK_CODEX_IDLE_MS.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_link_codex.appserver import AppServerClient, AppServerUnavailable
from agent_link_codex.managed import pid_alive
from agent_link_core.app import App
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_testing.codex_host import REPO_ROOT, CodexAppServer, McpServerConfig, codex_binary, write_codex_config
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text
from agent_link_waits.waits import waits_of

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(120)]

WAIT_MS = 20_000
WAIT_S = WAIT_MS / 1000
ALICE = Caller("test:alice", "config", "test")
OTHER_PLUGINS = "claude roles receipts"


def text_input(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value, "text_elements": []}]


async def test_codex_thread_replies_through_agent_link_tools(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # the Codex home: Codex does not pass its own to MCP servers, and the calling thread is
    # proved from its transcripts there (fromVerified) when no app-server is reachable
    # AGENT_LINK_TOOLS=all: a host's default lists the messaging tools only (agent_link_tools reaches the rest)
    server_env = {"AGENT_LINK_STATE_DIR": str(isolated_env), "AGENT_LINK_HOST": "codex", "AGENT_LINK_CODEX_AUTOSTART": "0",
                  "AGENT_LINK_TOOLS": "all",
                  "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS, "CODEX_HOME": str(tmp_path / "codex" / "codex-home")}
    servers = {"agent-link": McpServerConfig(command=sys.executable, args=["-m", "agent_link_core", "mcp"], env=server_env,
                                             startup_timeout_sec=30)}
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", mcp_servers=servers) as host:
        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            async with raw.subscription() as sub:
                thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
                await sub.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated" and n.params.get("name") == "agent-link"
                                   and n.params.get("status") == "ready", timeout_ms=WAIT_MS)
            monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
            monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
            monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
            monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", OTHER_PLUGINS)
            app = App.create()
            try:
                message_id = new_message_id()
                # the model answers the delivered envelope by calling agent-link's reply tool;
                # observed: Codex names the namespace of server "agent-link" mcp__agent_link
                stub.enqueue(mcp_tool_call("agent_link", "reply_agent_link_message",
                                           {"messageId": message_id, "message": "pong from the Codex thread"}), text("replied"))
                async with raw.subscription(thread_id=thread_id) as items:
                    sent = await app.send(caller=ALICE, to=f"codex:{thread_id}", body="ping: please answer", anticipation="reply",
                                          message_id=message_id)
                    assert sent.delivery is not None and sent.delivery.delivered, sent.delivery
                    waited = await waits_of(app).wait(caller=ALICE, agent=f"codex:{thread_id}", reply_to=message_id, timeout_ms=WAIT_MS, poll_ms=250)
                    tool = await items.wait_for(lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                                                timeout_ms=WAIT_MS)
                assert waited["outcome"] == "reply", waited
                assert waited["resolution"]["by"] == f"codex:{thread_id}"
                assert "pong from the Codex thread" in waited["reply"]["envelope"]
                assert waited["reply"]["from"] == f"codex:{thread_id}" and waited["reply"]["fromVerified"] is True
                item = tool.params["item"]
                assert (item["server"], item["tool"], item["status"]) == ("agent-link", "reply_agent_link_message", "completed")
                result = item["result"]["structuredContent"]
                assert result["ok"] is True and result["replyToMessageId"] == message_id
                # the model saw the tool's result object
                follow_up = await asyncio.to_thread(stub.wait_for, lambda r: r.last_input is not None
                                                    and r.last_input.get("type") == "function_call_output", WAIT_S)
                assert f'"replyToMessageId":"{message_id}"' in follow_up.function_call_output_texts()[0]
                # issue 29, item 6: Codex named the thread after its first message, the
                # envelope; it is listed by sender and first words, Codex's title kept raw
                listed = {s["address"]: s for s in (await app.list_agents(harness="codex"))["sessions"]}
                shown = listed[f"codex:{thread_id}"]
                assert shown["title"] == "test:alice: ping: please answer", shown
                assert shown["rawTitle"].startswith(f'<agent-link-message id="{message_id}"'), shown
                # issue 29, item 1b: the same thread's id in a process Codex did not start
                # (CODEX_THREAD_ID=<it> agent-link send) names the thread but proves nothing
                done = subprocess.run([sys.executable, "-m", "agent_link_core", "send", "test:alice", "forged", "--json"],
                                      env={**os.environ, "CODEX_THREAD_ID": thread_id}, capture_output=True, text=True,
                                      timeout=60, check=False)
                assert done.returncode == 0, done.stderr
                [warning] = [w for w in json.loads(done.stdout)["warnings"] if w["code"] == "sender_unverified"]
                assert warning["details"] == {"address": f"codex:{thread_id}", "namedBy": "env", "reason": "not_proven"}
                forged = app.store.conn.execute("SELECT id FROM messages WHERE body = 'forged'").fetchone()
                assert app.mailbox.to_view(app.mailbox.stored(forged["id"]))["fromVerified"] is False
            finally:
                await app.aclose()


async def test_prompt_hook_trusted_through_config_api_reaches_the_model(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The shipped declaration, with ${PLUGIN_ROOT} pointing at this checkout (a user-level
    # hooks.json has no plugin root; Codex sets PLUGIN_ROOT only for installed plugins).
    folder = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin"
    # the prompt hook alone (the lease guard's PreToolUse declaration: plugins/leases/tests)
    shipped = {"hooks": {"UserPromptSubmit": json.loads((folder / "hooks" / "codex-hooks.json").read_text())["hooks"]["UserPromptSubmit"]}}
    [group] = shipped["hooks"]["UserPromptSubmit"]
    command = group["hooks"][0]["command"].replace("${PLUGIN_ROOT}", str(folder))
    group["hooks"][0]["command"] = command
    env = {"AGENT_LINK_STATE_DIR": str(isolated_env), "AGENT_LINK_BIN": str(Path(sys.executable).with_name("agent-link"))}
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", env=env) as host:
        (host.codex_home / "hooks.json").write_text(json.dumps(shipped))
        monkeypatch.setenv("AGENT_LINK_CODEX_SOCK", str(host.socket_path))
        monkeypatch.setenv("CODEX_HOME", str(host.codex_home))
        monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "0")
        monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", OTHER_PLUGINS)
        app = App.create()
        harness = app.harnesses["codex"]
        try:
            async with await AppServerClient.connect_unix(host.socket_path) as raw:
                await raw.initialize("codex-tui", "0.0.1", timeout_ms=WAIT_MS)
                listed = await raw.request("hooks/list", {"cwds": [str(host.workdir)]}, timeout_ms=WAIT_MS)
                [hook] = [h for e in listed["data"] for h in e["hooks"]]
                assert (hook["eventName"], hook["trustStatus"], hook["command"]) == ("userPromptSubmit", "untrusted", command)
                await harness.service.connect(spawn=False)
                assert harness.health()["promptHook"]["trust"] == "untrusted"
                await raw.request("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "mergeStrategy": "upsert",
                                                                   "value": {hook["key"]: {"trusted_hash": hook["currentHash"]}}}],
                                                        "reloadUserConfig": True}, timeout_ms=WAIT_MS)
                # health asks Codex each time: the change shows with the same connection open
                view = harness.health()["promptHook"]
                assert (view["declared"], view["trust"], view["entries"][0]["key"]) == (True, "trusted", hook["key"])
                # a reinstall that changes the hook's command: Codex no longer trusts it, and says so now
                changed = json.loads(json.dumps(shipped))
                changed["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"] = command + " "
                (host.codex_home / "hooks.json").write_text(json.dumps(changed))
                relisted = await raw.request("hooks/list", {"cwds": [str(host.workdir)]}, timeout_ms=WAIT_MS)
                [moved] = [h for e in relisted["data"] for h in e["hooks"]]
                assert moved["trustStatus"] != "trusted", moved
                assert harness.health()["promptHook"]["trust"] == moved["trustStatus"]
                (host.codex_home / "hooks.json").write_text(json.dumps(shipped))
                assert harness.health()["promptHook"]["trust"] == "trusted"
                # the CLI's health asks Codex too (it holds no connection of its own)
                from click.testing import CliRunner

                from agent_link_core.cli import build_cli

                result = await asyncio.to_thread(lambda: CliRunner().invoke(build_cli(), ["health", "--json"], catch_exceptions=False))
                assert json.loads(result.stdout)["harnesses"]["codex"]["promptHook"]["trust"] == "trusted", result.stdout

                thread_id = (await raw.request("thread/start", {"cwd": str(host.workdir)}, timeout_ms=WAIT_MS))["thread"]["id"]
                # mail waiting for the thread (not pushed: the hook is the nudge path)
                app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, f"codex:{thread_id}", f"codex:{thread_id}",
                                                          "THE SECRET BODY", "reply", None, None))
                async with raw.subscription(thread_id=thread_id) as sub:
                    await raw.request("turn/start", {"threadId": thread_id, "input": text_input("what next?")}, timeout_ms=WAIT_MS)
                    ran = await sub.wait_for(lambda n: n.method == "hook/completed", timeout_ms=WAIT_MS)
                    await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
                assert ran.params["run"]["status"] == "completed" and ran.params["run"]["eventName"] == "userPromptSubmit"
                request = await asyncio.to_thread(stub.wait_for, lambda r: r.contains("what next?"), WAIT_S)
                developer = request.texts("developer")
                notes = [t for t in developer if "peer message is waiting" in t]
                assert len(notes) == 1 and "test:alice" in notes[0] and "read_agent_link_inbox" in notes[0], developer
                texts = request.texts()
                assert texts.index(notes[0]) == texts.index("what next?") + 1  # right after the user's message
                assert not request.contains("THE SECRET BODY")
                # the hook marks nothing delivered and left its heartbeat
                assert app.mailbox.count_open(f"codex:{thread_id}", undelivered_only=True) == 1
                assert harness.health()["promptHook"]["lastRunAt"] is not None
        finally:
            await app.aclose()


def managed_env(stub: ResponsesStub, codex_home: Path, **extra: str) -> dict[str, str]:
    write_codex_config(codex_home, stub.base_url)
    return {"AGENT_LINK_ADDRESS": "test:alice", "AGENT_LINK_CODEX_BIN": str(codex_binary()), "CODEX_HOME": str(codex_home),
            "MOCK_API_KEY": "stub-key", "AGENT_LINK_DISABLE_PLUGINS": OTHER_PLUGINS, **extra}


def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


async def test_the_private_app_server_leaves_nothing_others_can_read_whatever_the_umask(
        stub: ResponsesStub, tmp_path: Path, isolated_env: Path) -> None:
    import stat

    env = managed_env(stub, tmp_path / "codex-home", AGENT_LINK_DEBUG="1")
    old = os.umask(0)
    try:
        async with agent_link_mcp(env) as client:
            assert (await client.call("list_codex_threads", {}))["ok"]
            managed = (await client.call("agent_link_health", {}))["harnesses"]["codex"]["managed"]
            assert managed["running"]
            found = {}
            for dirpath, dirnames, filenames in os.walk(isolated_env):
                for name in [*dirnames, *filenames]:
                    path = Path(dirpath) / name
                    mode = path.lstat().st_mode
                    if stat.S_ISLNK(mode):  # Codex links the listen path to its real socket: where it lives counts
                        real = path.resolve()
                        found[f"{path.relative_to(isolated_env)} -> {real.parent}"] = stat.S_IMODE(real.parent.stat().st_mode)
                    else:
                        found[str(path.relative_to(isolated_env))] = stat.S_IMODE(mode)
            found["."] = stat.S_IMODE(isolated_env.stat().st_mode)
    finally:
        os.umask(old)
    assert any(p.endswith(".stderr.log") for p in found) and any(p.startswith("managed-app-servers/") for p in found)
    shared = {path: oct(mode) for path, mode in found.items() if mode & 0o077}
    assert not shared, f"readable by others: {shared}"


async def test_mcp_server_shutdown_leaves_no_app_server(stub: ResponsesStub, tmp_path: Path, isolated_env: Path) -> None:
    env = managed_env(stub, tmp_path / "codex-home")
    managed_dir = isolated_env / "managed-app-servers"
    pids = []
    # 1. stdin closed (the host quits)
    async with agent_link_mcp(env) as client:
        listed = await client.call("list_codex_threads", {})
        assert listed["ok"] and listed["source"] == "app-server", listed
        managed = (await client.call("agent_link_health", {}))["harnesses"]["codex"]["managed"]
        assert managed["running"] and managed["binarySource"] == "AGENT_LINK_CODEX_BIN"
        pids.append(managed["pid"])
        [record] = list(managed_dir.glob("*.json"))
        assert record.stat().st_mode & 0o777 == 0o600 and json.loads(record.read_text())["pid"] == managed["pid"]
        assert pid_alive(managed["pid"])
    assert wait_gone(pids[0]), "the private app-server outlived its MCP server"
    assert list(managed_dir.iterdir()) == []  # record, socket and log removed
    # 2. SIGTERM to the MCP server
    with pytest.raises(BaseException):  # noqa: B017 - the client's stream breaks when the server dies
        async with agent_link_mcp(env) as client:
            await client.call("list_codex_threads", {})
            managed = (await client.call("agent_link_health", {}))["harnesses"]["codex"]["managed"]
            pids.append(managed["pid"])
            owner = json.loads(next(managed_dir.glob("*.json")).read_text())["ownerPid"]
            os.kill(owner, signal.SIGTERM)
            assert wait_gone(owner), "the MCP server ignored SIGTERM"
            await client.call("agent_link_health", {})
    assert wait_gone(pids[1]), "the private app-server outlived its MCP server after SIGTERM"
    assert list(managed_dir.glob("*.json")) == []


async def test_orphan_of_a_killed_owner_is_reaped_and_idle_server_stops(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    env = managed_env(stub, tmp_path / "codex-home")
    managed_dir = isolated_env / "managed-app-servers"
    with pytest.raises(BaseException):  # noqa: B017 - the client's stream breaks when the server dies
        async with agent_link_mcp(env) as client:
            await client.call("list_codex_threads", {})
            record = json.loads(next(managed_dir.glob("*.json")).read_text())
            os.kill(record["ownerPid"], signal.SIGKILL)  # no chance to clean up
            assert wait_gone(record["ownerPid"])
            await client.call("agent_link_health", {})
    orphan = record["pid"]
    assert pid_alive(orphan), "SIGKILLing the owner should have left its app-server running"
    # the next owner reaps it when it starts its own, and stops its own when idle
    for name, value in {**env, "AGENT_LINK_CODEX_IDLE_MS": "600"}.items():
        monkeypatch.setenv(name, value)
    app = App.create()
    harness = app.harnesses["codex"]
    try:
        [link] = await harness.service.connect(spawn=True)
        assert link.managed and wait_gone(orphan, 5)
        view = harness.service.managed.view()
        assert {"record": f"{orphan}.json", "action": "stopped-orphan", "pid": orphan} in view["lastReap"]
        mine = view["pid"]
        await asyncio.sleep(1.5)
        assert not link.alive and wait_gone(mine, 5) and not harness.service.managed.running
        assert list(managed_dir.glob("*.json")) == []
        # a later call starts a new one
        [again] = await harness.service.connect(spawn=True)
        assert again.managed and again.pid != mine
    finally:
        await app.aclose()


async def test_private_app_server_over_a_token_websocket(stub: ResponsesStub, tmp_path: Path, isolated_env: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in managed_env(stub, tmp_path / "codex-home", AGENT_LINK_CODEX_TRANSPORT="ws-token").items():
        monkeypatch.setenv(name, value)
    old_umask = os.umask(0)  # what agent-link creates is private whatever the umask
    try:
        app = App.create()
        harness = app.harnesses["codex"]
        [link] = await harness.service.connect(spawn=True)
    finally:
        os.umask(old_umask)
    try:
        assert link.managed and link.endpoint.kind == "ws" and link.endpoint.target.startswith("ws://127.0.0.1:")
        token_file = Path(link.endpoint.token_file)
        assert token_file.stat().st_mode & 0o777 == 0o600 and len(token_file.read_text()) == 64
        made = [isolated_env, *isolated_env.rglob("*")]
        assert any(p.name.endswith(".stderr.log") for p in made)
        assert [str(p) for p in made if p.lstat().st_mode & 0o077] == []
        with pytest.raises(AppServerUnavailable) as refused:
            await AppServerClient.connect_ws(link.endpoint.target, token=None, open_timeout_ms=WAIT_MS)
        assert "HTTP 401" in refused.value.detail
        assert (await link.call("thread/start", {}))["thread"]["source"] == "vscode"
    finally:
        await app.aclose()
    assert not token_file.exists() and list((isolated_env / "managed-app-servers").glob("*.json")) == []


async def test_cli_send_starts_and_stops_a_private_app_server(stub: ResponsesStub, tmp_path: Path, isolated_env: Path) -> None:
    root = tmp_path / "codex"
    with CodexAppServer(stub.base_url, root=root) as host:  # a thread made by someone, then Codex quits
        async with await AppServerClient.connect_unix(host.socket_path) as raw:
            await raw.initialize("someone-else", "0.0.1", timeout_ms=WAIT_MS)
            thread_id = (await raw.request("thread/start", {}, timeout_ms=WAIT_MS))["thread"]["id"]
            async with raw.subscription(thread_id=thread_id) as sub:
                await raw.request("turn/start", {"threadId": thread_id, "input": text_input("setup")}, timeout_ms=WAIT_MS)
                await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
    env = {**os.environ, **managed_env(stub, root / "codex-home")}
    exe = str(Path(sys.executable).with_name("agent-link"))
    done = await asyncio.to_thread(subprocess.run, [exe, "send", f"codex:{thread_id}", "from the command line", "--json"],
                                   env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["outcome"], result["action"]) == ("delivered", "resumed+started_turn")
    assert result["evidence"]["clientId"] == result["messageId"]
    assert await asyncio.to_thread(stub.wait_for, lambda r: r.contains(result["messageId"]), WAIT_S)
    # the command's private app-server ended with it
    managed_dir = isolated_env / "managed-app-servers"
    assert list(managed_dir.iterdir()) == []
    leftover = subprocess.run(["pgrep", "-f", f"--listen unix://{managed_dir}"], capture_output=True, text=True)
    assert leftover.stdout == ""
