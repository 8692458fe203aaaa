"""agent-link installed as a Claude Code plugin, driven through the real, pinned Claude Code CLI.

Once per test session the plugin is installed with ``claude plugin marketplace add <folder>``
then ``claude plugin install agent-link@agent-link``, in a temporary HOME. The folder is a lean
staging copy of the plugin's files (conftest ``installed``), since Claude Code copies a
directory marketplace whole into its cache and the checkout is about 1 GB; one test installs
from the repository's own marketplace (``installed_from_repo``). Every test then runs
``claude -p`` (or a long-running stream-json session) against the stub Messages API; the stub
model calls agent-link's tools by their plugin names
(``mcp__plugin_agent-link_codex-agent-link__<tool>``). Each test has its own agent-link state dir.

If the binary is missing these tests fail with "run `make hosts`"; they never skip.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import agent_link_claude
from agent_link_core.app import App
from agent_link_core.model import Caller
from agent_link_testing.claude_host import ClaudeHost
from agent_link_testing.hosts import claude_version, version_at_least
from agent_link_testing.locks import hold_write_lock
from agent_link_testing.mcp_client import agent_link_mcp
from agent_link_testing.messages_stub import MessagesStub, RecordedRequest, Reply, tool_result

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(240)]

REPO = Path(agent_link_claude.__file__).resolve().parents[3]
PLUGIN = "agent-link@agent-link"
SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"
RUN_TIMEOUT_S = 90.0
ALICE = Caller("test:alice", "config", "test")
# the first release known to open MCP connections with server/discover (the 2026-07-28 revision)
PROBES_DISCOVER_SINCE = "2.1.332"
# switches off Claude Code's own inbox socket (2.1.224+), for tests of the fallback paths
# (channel, hook notes); with the socket, senders push through it (test_claude_native_realhost.py)
NO_INBOX = {"CLAUDE_CODE_HARBOR_KITE": "0"}
INBOX_SINCE = "2.1.224"
CHANNEL_FLAGS = {"cachedGrowthBookFeatures": {"tengu_harbor": True,
                                              "tengu_harbor_ledger": [{"marketplace": "agent-link", "plugin": "agent-link"}]}}


def tool(name: str) -> str:
    return f"{SERVER_RULE}__{name}"


@pytest.fixture
def stub():
    with MessagesStub() as s:
        yield s


@pytest.fixture
def claude(installed: Any, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch) -> ClaudeHost:
    host = installed.host(stub=stub)
    # this process's own agent-link (App, MCP clients) sees the sessions of that HOME
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    return host


@pytest.fixture
def app(claude: ClaudeHost):
    application = App.create()
    yield application
    application.close()


def project(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def new_session(claude: ClaudeHost, stub: MessagesStub, cwd: Path, prompt: str = "hello") -> str:
    stub.enqueue("Ready.")
    done = claude.run_p(prompt, cwd=cwd, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return claude.session_of(done, cwd=cwd).session_id


def resume(claude: ClaudeHost, session_id: str, cwd: Path, prompt: str) -> dict[str, Any]:
    done = claude.run_p(prompt, cwd=cwd, args=["--resume", session_id], timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def test_plugin_manifests_validate(claude: ClaudeHost) -> None:
    done = claude.run_cli("plugin", "validate", str(REPO))
    assert done.returncode == 0 and "Validation passed" in done.stdout, done.stdout + done.stderr


def test_message_agent_reaches_another_session_and_shows_in_its_next_prompt(
    claude: ClaudeHost, stub: MessagesStub, app: App, tmp_path: Path,
) -> None:
    proj_b, proj_a = project(tmp_path, "b"), project(tmp_path, "a")
    b = new_session(claude, stub, proj_b)
    [first] = stub.main_requests
    # a host's default tool list: the messaging tools, the Claude tools through agent_link_tools
    assert tool("message_agent") in first.tool_names() and tool("agent_link_tools") in first.tool_names()
    assert tool("message_claude_session") not in first.tool_names()
    assert "peer message" not in first.text()  # no mail: the hooks printed nothing
    health = app.health()["harnesses"]["claude"]
    assert set(health["hooks"]["lastRun"]) == {"SessionStart", "UserPromptSubmit", "Stop"}  # the hooks ran
    assert (health["plugin"]["installed"], health["plugin"]["enabled"]) == ([PLUGIN], [PLUGIN])

    stub.enqueue(
        Reply.tool_use(tool("message_agent"), {"to": f"claude:{b}", "message": "Please check the build.", "anticipation": "reply"}),
        "Sent it.",
    )
    done = claude.run_p("ask the other session to check the build", cwd=proj_a, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    a = claude.session_of(done, cwd=proj_a).session_id
    sent = tool_result(stub.main_requests[-1])
    assert sent["ok"] and sent["to"] == f"claude:{b}" and sent["deliveryState"] == "queued-offline"
    row = app.mailbox.get_row(sent["messageId"])
    assert (row["from_addr"], row["recipient"], row["body"]) == (f"claude:{a}", f"claude:{b}", "Please check the build.")
    assert row["from_source"] in ("current_session", "env") and app.mailbox.to_view(row)["fromVerified"] is True

    stub.enqueue("I see a note.")
    resume(claude, b, proj_b, "anything new?")
    request = stub.main_requests[-1]
    note = f"1 peer message is waiting from claude:{a}"
    located = request.locate(note)
    assert located and all(request.messages[int(p.split("[")[1].split("]")[0])]["role"] == "system" for p in located), located
    assert "UserPromptSubmit hook additional context: agent-link" in request.text()
    assert "Please check the build." not in request.text()  # a note never carries the body
    assert app.mailbox.get_row(sent["messageId"])["first_delivered_at"] is None  # nor marks it delivered


def test_installed_from_the_repository_root_health_names_the_session_and_the_channel_gate(
    installed_from_repo: Any, stub: MessagesStub, tmp_path: Path,
) -> None:
    # the repository's marketplace: the launcher finds agent-link on PATH
    claude = installed_from_repo.host(stub=stub)
    assert "AGENT_LINK_BIN" not in claude.environ()
    # Claude Code copied only the plugin folder into its cache, not the checkout
    [copy] = (claude.config_dir / "plugins" / "cache" / "agent-link" / "agent-link").iterdir()
    assert not (copy / ".venv").exists() and not (copy / "agent_link_core").exists()
    assert sum(p.stat().st_size for p in copy.rglob("*") if p.is_file()) < 1024 * 1024
    cwd = project(tmp_path, "h")
    stub.enqueue(Reply.tool_use(tool("agent_link_health"), {"includeCallerContext": True}), "Healthy.")
    done = claude.run_p("how is agent-link?", cwd=cwd, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    sid = claude.session_of(done, cwd=cwd).session_id
    health = tool_result(stub.main_requests[-1])
    assert health["ok"] and health["host"] == "claude" and health["address"] == f"claude:{sid}"
    # the server found its claude parent's live-session file (the source that follows /clear)
    assert health["addressSource"] == "current_session"
    meta = health["callerContext"]["meta"]  # Claude Code sends no session id in _meta
    assert "claudecode/toolUseId" in meta and not any("session" in key.lower() for key in meta)
    mine = health["harnesses"]["claude"]
    assert mine["channel"]["declared"] is True
    if version_at_least(claude_version(), INBOX_SINCE):
        # the session has its own inbox socket: senders push there, so the channel stays shut
        assert mine["channel"]["bridge"]["gate"]["reason"] == "native_inbox"
    else:
        assert mine["channel"]["bridge"]["gate"]["reason"] == "flag_cache_off:CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"
    [path] = [p for p in mine["sessions"] if p["sessionId"] == sid]
    assert path["delivery"] == ("native-inbox" if version_at_least(claude_version(), INBOX_SINCE) else "hook-only"), path
    # the channel is wanted, so the connection runs the initialize handshake; a release that
    # probes server/discover first was refused and fell back to it
    mcp = health["mcp"]
    assert mcp["era"] == "handshake" and mcp["initialized"] is True and mcp["protocolVersion"] != "2026-07-28"
    assert mcp["client"] == {"name": "claude-code", "version": claude_version()}
    assert mcp["discoverRefused"] is version_at_least(claude_version(), PROBES_DISCOVER_SINCE)
    assert mine["channel"]["protocolVersion"] == mcp["protocolVersion"]
    # a directory marketplace runs the plugin from the source folder (the cache copy is unused)
    assert Path(mine["plugin"]["root"]).resolve() == Path(agent_link_claude.__file__).resolve().parent / "host_plugin"


@pytest.mark.anyio
async def test_pending_mail_is_read_and_answered_and_the_senders_wait_returns_the_reply(
    claude: ClaudeHost, stub: MessagesStub, tmp_path: Path,
) -> None:
    cwd = project(tmp_path, "b")
    b = await anyio.to_thread.run_sync(lambda: new_session(claude, stub, cwd))
    async with agent_link_mcp({"AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        sent = await alice.call("message_agent", {"to": f"claude:{b}", "message": "What is 6 times 7?", "anticipation": "reply"})
        mid = sent["messageId"]
        stub.enqueue(
            Reply.tool_use(tool("read_agent_link_inbox"), {}),
            Reply.tool_use(tool("reply_agent_link_message"), {"messageId": mid, "message": "It is 42."}),
            "Answered the peer.",
        )
        waited: dict[str, Any] = {}

        async def wait() -> None:
            waited["result"] = await alice.call("wait_for_agent", {"agent": f"claude:{b}", "replyToMessageId": mid, "timeoutMs": 50000})

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            result = await anyio.to_thread.run_sync(lambda: resume(claude, b, cwd, "check your messages"))
    assert result["result"] == "Answered the peer."
    note_req, inbox_req, reply_req = stub.main_requests[-3:]
    assert "1 peer message is waiting from test:alice" in note_req.text()
    inbox = tool_result(inbox_req)
    assert inbox["markedDelivered"] == [mid] and f'<agent-link-message id="{mid}"' in inbox["renderedBlock"]
    assert "What is 6 times 7?" in inbox["renderedBlock"]
    replied = tool_result(reply_req)
    assert replied["ok"] and replied["status"] == "replied" and replied["target"]["address"] == "test:alice"
    out = waited["result"]
    assert out["outcome"] == "reply" and out["timedOut"] is False
    assert out["reply"]["from"] == f"claude:{b}" and out["reply"]["fromVerified"] is True
    assert "It is 42." in out["reply"]["envelope"]


def test_stop_blocks_once_with_the_reminder_and_the_session_then_ends(
    claude: ClaudeHost, stub: MessagesStub, app: App, tmp_path: Path,
) -> None:
    cwd = project(tmp_path, "b")
    b = new_session(claude, stub, cwd)
    mid = anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{b}", body="Review PR 7 please.", anticipation="reply")).message["id"]
    app.mailbox.mark_delivered(mid, "inbox")  # read earlier, never answered
    db = app.config.db_path

    def make_reminder_due(request: RecordedRequest) -> str:
        # runs while the turn is in flight, after UserPromptSubmit: the reminder falls due before Stop
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 60000 WHERE id = ?", (mid,))
            conn.execute("UPDATE reminders SET at = at - 60000 WHERE message_id = ?", (mid,))
        return "Working on the user's task."

    before = len(stub.main_requests)
    stub.enqueue(make_reminder_due, "I will answer the review request next.")
    result = resume(claude, b, cwd, "continue with the task")
    turn = stub.main_requests[before:]
    assert len(turn) == 2, [r.last_user_message() for r in turn]
    feedback = json.dumps(turn[1].last_user_message())
    assert "Stop hook feedback" in feedback and "agent-link reminder 1 of 3" in feedback and "test:alice" in feedback
    assert "Review PR 7" not in feedback
    assert result["result"] == "I will answer the review request next."  # the second stop was not blocked
    rows = app.store.conn.execute("SELECT n, via FROM reminders WHERE message_id = ?", (mid,)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "claude-stop-hook")]
    assert app.store.conn.execute("SELECT COUNT(*) FROM nudge_blocks").fetchone()[0] == 1

    # a second reminder falls due in the next turn, but the last block is under one interval old
    before = len(stub.main_requests)
    stub.enqueue(make_reminder_due)
    resume(claude, b, cwd, "and now?")
    assert len(stub.main_requests) - before == 1
    assert app.store.conn.execute("SELECT COUNT(*) FROM nudge_blocks").fetchone()[0] == 1


def test_a_prompt_while_another_process_writes_gets_its_note_and_the_skipped_reminder_comes_next(
    claude: ClaudeHost, stub: MessagesStub, app: App, tmp_path: Path,
) -> None:
    cwd = project(tmp_path, "w")
    b = new_session(claude, stub, cwd)
    anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{b}", body="The logs are in /tmp.", anticipation="fyi"))
    asked = anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{b}", body="Review PR 7 please.", anticipation="reply"))
    mid = asked.message["id"]
    app.mailbox.mark_delivered(mid, "inbox")  # read earlier, never answered: its reminder falls due
    with app.store.write() as conn:
        conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - 60000 WHERE id = ?", (mid,))
    before = len(stub.main_requests)
    stub.enqueue("Noted.")
    with hold_write_lock(app.config.db_path):  # another agent-link process is writing all along
        resume(claude, b, cwd, "anything new?")
    text = stub.main_requests[before].text()
    assert "1 peer message is waiting from test:alice" in text  # the note (a read) still reaches the model...
    assert "UserPromptSubmit hook additional context: agent-link" in text  # ...from the prompt's own hook too
    assert "agent-link reminder" not in text and "Review PR 7" not in text  # the claim waits for the lock
    assert app.mailbox.state(app.mailbox.get_row(mid)).reminder_count == 0  # nothing claimed, nothing lost
    stub.enqueue("Noted again.")
    resume(claude, b, cwd, "and now?")
    assert "agent-link reminder 1 of 3" in stub.main_requests[-1].text()  # the next prompt shows it
    rows = app.store.conn.execute("SELECT n, via FROM reminders WHERE message_id = ?", (mid,)).fetchall()
    assert [tuple(r) for r in rows] == [(1, "claude-prompt-hook")]


def test_after_clear_the_server_speaks_for_the_new_session(
    claude: ClaudeHost, stub: MessagesStub, app: App, tmp_path: Path,
) -> None:
    # /clear gives the session a new id without restarting MCP servers (their environment keeps
    # the old id); the claude process rewrites its live-session file, which the server follows.
    cwd = project(tmp_path, "c")
    stub.enqueue("Before clear.", Reply.tool_use(tool("agent_link_health"), {}), "After clear.")
    with claude.start_stream(cwd=cwd, env_extra=NO_INBOX) as stream:
        stream.send("hello")
        old = stream.wait_results(1, RUN_TIMEOUT_S)[0]["session_id"]
        stream.send("/clear")
        new = stream.wait_results(2, RUN_TIMEOUT_S)[1]["session_id"]
        assert new != old
        _wait(lambda: any(s.id == new and s.loaded for s in anyio.run(app.harnesses["claude"].list_sessions).sessions),
              30, "the new id is live")
        anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{new}", body="For the fresh session.", anticipation="fyi"))
        stream.send("status?")
        stream.wait_results(3, RUN_TIMEOUT_S)
    note_request, health_request = stub.main_requests[-2:]
    assert "1 peer message is waiting from test:alice" in note_request.text()  # the hook used the new id
    health = tool_result(health_request)
    assert (health["address"], health["addressSource"]) == (f"claude:{new}", "current_session")


def _channel_text(request: RecordedRequest, mid: str) -> str | None:
    for message in request.messages:
        if message.get("role") != "user":
            continue
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            text = block.get("text", "") if isinstance(block, dict) else ""
            if text.startswith("<channel ") and f'message_id="{mid}"' in text:
                return text
    return None


def test_channel_push_reaches_a_running_session_as_a_new_turn(
    installed: Any, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    # Channels need the feature-flag cache, which CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC turns
    # off; "blackhole" keeps the machine offline through the stub's refusing proxy instead.
    host = installed.host(stub=stub, outbound="blackhole")
    host.update_global_config(CHANNEL_FLAGS)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = project(tmp_path, "live")
    app = App.create()
    try:
        stub.enqueue("First turn done.", "Thanks, I saw the peer message.")
        with host.start_stream(cwd=cwd, args=["--channels", f"plugin:{PLUGIN}"], env_extra=NO_INBOX) as stream:
            stream.send("hello")
            [first] = stream.wait_results(1, RUN_TIMEOUT_S)
            sid = first["session_id"]
            _wait(lambda: sid in app.harnesses["claude"].channel_sessions(), 30, "the bridge registered")
            outcome = anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{sid}", body="Build is green.", anticipation="fyi"))
            assert outcome.delivery.state == "queued-channel"
            mid = outcome.message["id"]
            results = stream.wait_results(2, RUN_TIMEOUT_S)
            assert results[1]["result"] == "Thanks, I saw the peer message."
        text = _channel_text(stub.main_requests[-1], mid)
        assert text is not None, stub.main_requests[-1].text()[:3000]
        assert 'source="plugin:agent-link:codex-agent-link"' in text and 'from_session_id="test:alice"' in text
        assert f'<agent-link-message id="{mid}"' in text and "Build is green." in text
        row = app.mailbox.get_row(mid)
        assert row["delivered_via"] == "channel" and row["first_delivered_at"] is not None
        transcript = host.transcript_dir(cwd) / f"{sid}.jsonl"
        origins = [json.loads(line).get("origin") for line in transcript.read_text().splitlines()]
        assert {"kind": "channel", "server": "plugin:agent-link:codex-agent-link"} in origins
    finally:
        app.close()


def test_without_the_channels_flag_nothing_is_pushed_and_the_prompt_note_says_so(
    installed: Any, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    host = installed.host(stub=stub, outbound="blackhole")
    host.update_global_config(CHANNEL_FLAGS)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = project(tmp_path, "quiet")
    app = App.create()
    try:
        stub.enqueue("First turn done.", "Noted the waiting message.")
        with host.start_stream(cwd=cwd, env_extra=NO_INBOX) as stream:
            stream.send("hello")
            sid = stream.wait_results(1, RUN_TIMEOUT_S)[0]["session_id"]
            outcome = anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{sid}", body="Build is red.", anticipation="fyi"))
            assert outcome.delivery.state == "queued-online"  # running, but no open channel
            mid = outcome.message["id"]
            time.sleep(4.0)  # several bridge wake-ups
            assert app.mailbox.get_row(mid)["first_delivered_at"] is None  # not pushed into the void
            assert len(stub.main_requests) == 1
            stream.send("next task")
            stream.wait_results(2, RUN_TIMEOUT_S)
        assert "1 peer message is waiting from test:alice" in stub.main_requests[-1].text()
    finally:
        app.close()



def test_a_plain_server_named_by_no_channel_entry_pushes_nothing(stub: MessagesStub, monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """agent-link configured as a plain MCP server (not the plugin) in a session started with
    ``--channels plugin:agent-link@agent-link``: Claude Code would drop its channel events, so
    the gate stays closed (``server_not_from_plugin``) and nothing counts as pushed."""
    from agent_link_testing.claude_host import agent_link_bin, mcp_stdio_server, write_mcp_config

    host = ClaudeHost.create(tmp_path / "home", stub=stub, outbound="blackhole")
    host.update_global_config(CHANNEL_FLAGS)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = project(tmp_path, "plain")
    app = App.create()
    try:
        config = write_mcp_config(tmp_path / "mcp.json", {"agent-link": mcp_stdio_server(
            str(agent_link_bin()), ["mcp"], {"AGENT_LINK_HOST": "claude", "AGENT_LINK_STATE_DIR": str(app.config.state_dir)})})
        stub.enqueue("First turn done.", "Noted.")
        with host.start_stream(cwd=cwd, args=["--mcp-config", str(config), "--channels", f"plugin:{PLUGIN}"], env_extra=NO_INBOX) as stream:
            stream.send("hello")
            sid = stream.wait_results(1, RUN_TIMEOUT_S)[0]["session_id"]
            outcome = anyio.run(lambda: app.send(caller=ALICE, to=f"claude:{sid}", body="Build is red.", anticipation="fyi"))
            assert outcome.delivery.state == "queued-online", outcome.delivery  # no channel this session would show
            time.sleep(4.0)  # several bridge wake-ups
            assert sid not in app.harnesses["claude"].channel_sessions()
            assert app.mailbox.get_row(outcome.message["id"])["first_delivered_at"] is None
            assert len(stub.main_requests) == 1  # no pushed turn
    finally:
        app.close()


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting until {what}")
        time.sleep(0.2)


def test_without_a_channel_the_server_speaks_the_revision_claude_code_opens_with(
    installed: Any, stub: MessagesStub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    # nothing needs the handshake: a release that probes server/discover gets the stateless
    # revision, the tools work on it, and health says why the channel gate is closed
    host = installed.host(stub=stub, env={"AGENT_LINK_DISABLE_CHANNEL": "1"})
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(host.config_dir))
    cwd = project(tmp_path, "plain")
    stub.enqueue(Reply.tool_use(tool("agent_link_health"), {}), "Healthy.")
    done = host.run_p("how is agent-link?", cwd=cwd, timeout_s=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    health = tool_result(stub.main_requests[-1])
    assert health["ok"] and health["address"] == f"claude:{host.session_of(done, cwd=cwd).session_id}"
    mcp = health["mcp"]
    if version_at_least(claude_version(), PROBES_DISCOVER_SINCE):
        assert (mcp["era"], mcp["protocolVersion"], mcp["discoverRefused"]) == ("stateless", "2026-07-28", False)
    else:
        assert mcp["era"] == "handshake" and mcp["initialized"] is True
    assert mcp["client"] == {"name": "claude-code", "version": claude_version()}
    channel = health["harnesses"]["claude"]["channel"]
    assert channel["declared"] is False and channel["bridge"]["gate"]["reason"] == "channel_disabled"
