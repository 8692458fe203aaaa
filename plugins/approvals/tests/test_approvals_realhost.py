"""``agent-link approvals`` against the REAL pinned hosts (Codex app-server, ``claude -p``).

* Codex: the plugin is installed into a temporary CODEX_HOME from a lean copy of the
  repository's marketplace (``codex plugin marketplace add`` + ``codex plugin add``; the
  checkout itself would be copied whole into Codex's cache). Then, in one app-server, a new
  thread after each config change:

  1. the config as ``codex plugin add`` leaves it: ``check`` says complete, and for each tool
     it reports, real Codex agrees (read-only and non-destructive tools run, the role-admin
     gateway ``agent_link_tools``, through which a model reaches ``set_agent_role``, fails under
     ``approval_policy = "never"``);
  2. the user asks to be prompted for the server (``default_tools_approval_mode =
     "prompt"``): ``check`` exits 1, ``apply`` appends the read-only tables; a read-only tool
     then runs with no approval request, while ``message_agent`` still fails under ``never``
     and raises an elicitation request under ``on-request``;
  3. ``apply --all``: ``message_agent`` runs, ``agent_link_tools`` still asks.

* Claude Code: the plugin installed in a temporary HOME with no permission rules; ``apply
  --claude-settings`` on that HOME's user settings; ``claude -p`` (no ``--allowedTools``)
  whose stub model calls a read-only tool gets its result, and a side-effecting one is refused.

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_approvals.manifests import read_codex_plugin
from agent_link_codex.appserver import AppServerClient
from agent_link_testing.claude_host import ClaudeHost, agent_link_bin, stage_plugin
from agent_link_testing.codex_host import REPO_ROOT, CodexAppServer
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(900)]

WAIT_MS = 120_000
APPROVAL_ERROR = "MCP tool call requires approval, but approval policy is never"
CLAUDE_RULE = "mcp__plugin_agent-link_codex-agent-link"
# A host's server lists the messaging tools and agent_link_tools (docs/plugins.md), the gateway
# through which a model reaches the role-admin tools: it is the one that must keep asking.
ADMIN = "agent_link_tools"
ARGS = {"message_agent": {"to": "team:bob", "message": "hello"},
        ADMIN: {"name": "set_agent_role", "arguments": {"role": "router", "agent": "team:bob"}}}


def approvals(*args: str | Path) -> tuple[int, dict[str, Any]]:
    """Run ``agent-link approvals <args> --json``; returns the exit code and the JSON object."""
    done = subprocess.run([str(agent_link_bin()), "approvals", *map(str, args), "--json"], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def stage_codex_plugin(dest: Path) -> Path:
    """Copy the Codex plugin's files (marketplace, manifests, launcher, hook file) to ``dest``."""
    plugin = read_codex_plugin()
    manifest = json.loads((plugin.plugin_root / ".codex-plugin" / "plugin.json").read_text())
    hooks = os.path.relpath(plugin.plugin_root / manifest["hooks"], REPO_ROOT)
    for rel in {*plugin.files, hooks}:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, dest / rel)
    return dest


@pytest.fixture
def short_root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="alapr-"))  # the app-server's socket path must stay short
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Turns:
    """Runs one stub-model turn per tool call on a thread of a real app-server."""

    def __init__(self, raw: AppServerClient, stub: ResponsesStub) -> None:
        self.raw, self.stub = raw, stub

    async def thread(self, approval_policy: str | None = None) -> str:
        params = {"approvalPolicy": approval_policy} if approval_policy else {}
        async with self.raw.subscription() as sub:
            thread_id = (await self.raw.request("thread/start", params, timeout_ms=WAIT_MS))["thread"]["id"]
            await sub.wait_for(lambda n: n.method == "mcpServer/startupStatus/updated" and n.params.get("name") == "codex-agent-link"
                               and n.params.get("status") == "ready", timeout_ms=WAIT_MS)
        return str(thread_id)

    async def call(self, thread_id: str, tool: str) -> dict[str, Any]:
        """The completed ``mcpToolCall`` item of the turn whose model calls ``tool``."""
        self.stub.enqueue(mcp_tool_call("codex_agent_link", tool, ARGS.get(tool, {})), text("done"))
        async with self.raw.subscription(thread_id=thread_id) as items:
            await self.raw.request("turn/start", {"threadId": thread_id, "input": [
                {"type": "text", "text": f"call {tool}", "text_elements": []}]}, timeout_ms=WAIT_MS)
            done = await items.wait_for(lambda n: n.method == "item/completed" and n.params["item"]["type"] == "mcpToolCall",
                                        timeout_ms=WAIT_MS)
            await items.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)
        item: dict[str, Any] = done.params["item"]
        assert (item["server"], item["tool"]) == ("codex-agent-link", tool), item
        return item


def ran(item: dict[str, Any]) -> bool:
    """The call reached agent-link (it may still be refused by agent-link itself)."""
    return item["status"] == "completed" or bool(item.get("result"))


def asked(item: dict[str, Any]) -> bool:
    return item["status"] == "failed" and APPROVAL_ERROR in json.dumps(item.get("error"))


async def test_codex_approvals_check_and_apply_match_the_real_codex(short_root: Path) -> None:
    marketplace = stage_codex_plugin(short_root / "mkt")
    venv_path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the launcher finds agent-link on PATH
    with ResponsesStub() as stub, CodexAppServer(stub.base_url, root=short_root / "codex", env={"PATH": venv_path},
                                                 startup_timeout_s=120) as host:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_"))}
        env.update(HOME=str(host.home), CODEX_HOME=str(host.codex_home), PATH=venv_path)
        plugin_id = read_codex_plugin().plugin_id
        assert plugin_id is not None
        for args in (["plugin", "marketplace", "add", str(marketplace)], ["plugin", "add", plugin_id]):
            done = await asyncio.to_thread(subprocess.run, [str(host.binary), *args], check=False, env=env,
                                           capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
        config = host.codex_home / "config.toml"

        async with await AppServerClient.connect_unix(host.socket_path, refuse_server_requests=True) as raw:
            await raw.initialize("approvals-test", "0.0.1", timeout_ms=WAIT_MS)
            turns = Turns(raw, stub)

            # 1. as installed: complete; what check reports, Codex does
            code, report = await asyncio.to_thread(approvals, "check", "--codex-config", config)
            assert code == 0 and report["complete"], report
            said = {t["tool"]: t["approved"] for t in report["codex"]["tools"]}
            assert said["list_agents"] and said["message_agent"] and not said[ADMIN]
            thread = await turns.thread()
            for tool in ("list_agents", "message_agent", ADMIN):
                item = await turns.call(thread, tool)
                assert (ran(item), asked(item)) == (said[tool], not said[tool]), (tool, item)

            # 2. the user wants to be asked for this server; apply approves the read-only tools only
            await asyncio.to_thread(append, config, f'\n[plugins."{plugin_id}".mcp_servers.codex-agent-link]\n'
                                    'default_tools_approval_mode = "prompt"\n')
            code, report = await asyncio.to_thread(approvals, "check", "--codex-config", config)
            assert code == 1 and "list_agents" in {m["tool"] for m in report["codex"]["missing"]}
            before = config.read_bytes()
            code, report = await asyncio.to_thread(approvals, "apply", "--codex-config", config)
            assert code == 0 and report["codex"]["written"] and config.read_bytes().startswith(before), report
            thread = await turns.thread()
            item = await turns.call(thread, "list_agents")
            assert item["status"] == "completed" and item["result"]["structuredContent"]["ok"] is True, item
            assert asked(await turns.call(thread, "message_agent"))
            assert raw.server_request_counts == {}  # no approval request reached the client
            on_request = await turns.thread("on-request")
            assert (await turns.call(on_request, "list_agents"))["status"] == "completed"
            assert raw.server_request_counts == {}
            refused = await turns.call(on_request, "message_agent")  # the client declines the request
            assert raw.server_request_counts == {"mcpServer/elicitation/request": 1} and not ran(refused)

            # 3. --all: side-effecting tools run too, the role-admin tools still ask
            code, report = await asyncio.to_thread(approvals, "apply", "--codex-config", config, "--all")
            assert code == 0 and ADMIN not in report["codex"]["appended"], report
            thread = await turns.thread()
            assert ran(await turns.call(thread, "message_agent"))
            assert asked(await turns.call(thread, ADMIN))


def test_claude_apply_allows_read_only_tools_and_keeps_side_effecting_ones_denied(tmp_path: Path) -> None:
    staged = stage_plugin(tmp_path / "mkt")
    env = {"AGENT_LINK_BIN": str(agent_link_bin())}
    installer = ClaudeHost.create(tmp_path / "home", env=env)
    installer.install_plugin(staged, "agent-link@agent-link")
    code, report = approvals("apply", "--claude-settings", installer.settings_path)
    assert code == 0 and report["claude"]["written"], report
    allow = json.loads(installer.settings_path.read_text())["permissions"]["allow"]
    assert f"{CLAUDE_RULE}__list_agents" in allow and f"{CLAUDE_RULE}__message_agent" not in allow
    project = tmp_path / "proj"
    project.mkdir()
    with MessagesStub() as stub:
        host = ClaudeHost.create(tmp_path / "home", stub=stub, env=env)
        results = {}
        for tool, args in (("list_agents", {}), ("message_agent", ARGS["message_agent"])):
            stub.enqueue(Reply.tool_use(f"{CLAUDE_RULE}__{tool}", args), "done")
            done = host.run_p(f"call {tool}", cwd=project, timeout_s=240)
            assert done.returncode == 0, done.stdout + done.stderr
            [block] = stub.main_requests[-1].tool_results()
            content = block["content"]
            results[tool] = (content if isinstance(content, str) else "".join(c.get("text", "") for c in content),
                             json.loads(done.stdout).get("permission_denials"))
    listed, denials = results["list_agents"]
    assert json.loads(listed)["ok"] is True and denials == []
    refused, denials = results["message_agent"]
    assert "haven't granted it yet" in refused and [d["tool_name"] for d in denials] == [f"{CLAUDE_RULE}__message_agent"]
