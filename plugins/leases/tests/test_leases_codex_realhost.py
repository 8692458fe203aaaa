"""The edit guard in a REAL Codex thread (the pinned ``codex app-server``, stub Responses API):
the Codex plugin's shipped ``PreToolUse`` declaration (``hooks/codex-hooks.json``, trusted
through the app-server's config API) refuses an ``apply_patch`` and a shell write into a path
a Claude Code session holds exclusively, naming the holder; after the release the same
patch goes through.

Facts observed with Codex 0.171.0 (model ``gpt-6-sol`` of its catalog, whose ``apply_patch``
is a freeform tool; the stub's default ``mock-model`` offers no ``apply_patch``): the hook
gets ``tool_name`` ``apply_patch`` with the patch in ``tool_input.command``, and ``Bash``
with the command line for ``exec_command``; ``session_id`` is the thread id. A ``deny``
answer keeps the tool from running and the model reads ``Command blocked by PreToolUse
hook: <reason>``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_codex.appserver import AppServerClient
from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, claim, release
from agent_link_testing.codex_host import REPO_ROOT, CodexAppServer
from agent_link_testing.responses_stub import Reply, ResponsesStub, function_call, text

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT_MS = 30_000
HOLDER = "claude:0f9e8d7c-aaaa-bbbb-cccc-000000000009"
#: a catalog model whose apply_patch tool is freeform (custom_tool_call)
PATCH_MODEL = "gpt-6-sol"


def patch_call(patch: str, call_id: str) -> Reply:
    return Reply(items=({"type": "custom_tool_call", "id": f"ctc_{call_id}", "call_id": call_id, "name": "apply_patch", "input": patch},))


def add_file(path: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+print('hi')\n*** End Patch\n"


def shipped_hooks() -> dict[str, Any]:
    """The Codex plugin's hook declarations with ``${PLUGIN_ROOT}`` pointing at this checkout
    (a user-level hooks.json has no plugin root)."""
    folder = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin"
    text_ = (folder / "hooks" / "codex-hooks.json").read_text().replace("${PLUGIN_ROOT}", str(folder))
    return dict(json.loads(text_))


def outputs(stub: ResponsesStub) -> dict[str, str]:
    """call id -> the tool output the model read, from the last request's input."""
    return {i["call_id"]: str(i.get("output")) for i in stub.requests[-1].input
            if i.get("type") in ("custom_tool_call_output", "function_call_output")}


@pytest.fixture
def stub() -> Iterator[ResponsesStub]:
    with ResponsesStub() as server:
        yield server


async def run_turn(raw: AppServerClient, thread_id: str) -> None:
    async with raw.subscription(thread_id=thread_id) as sub:
        await raw.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "edit", "text_elements": []}]},
                          timeout_ms=WAIT_MS)
        await sub.wait_for(lambda n: n.method == "turn/completed", timeout_ms=WAIT_MS)


async def test_codex_patch_and_shell_write_refused_until_released(app: App, repo: str, stub: ResponsesStub, tmp_path: Path,
                                                                  isolated_env: Path) -> None:
    root = Project(repo, False)
    claim(app.store, HOLDER, root, ["src/pkg"], exclusive=True, reason="renaming the package", ttl_ms=600_000, now=now_ms())
    env = {"AGENT_LINK_STATE_DIR": str(isolated_env), "AGENT_LINK_BIN": str(Path(sys.executable).with_name("agent-link"))}
    extra = {"model": PATCH_MODEL, "sandbox_mode": "workspace-write"}
    with CodexAppServer(stub.base_url, root=tmp_path / "codex", env=env, config_extra=extra) as host:
        (host.codex_home / "hooks.json").write_text(json.dumps(shipped_hooks()))
        async with await AppServerClient.connect_unix(host.socket_path) as raw:
            await raw.initialize("leases-test", "0.0.1", timeout_ms=WAIT_MS)
            listed = await raw.request("hooks/list", {"cwds": [repo]}, timeout_ms=WAIT_MS)
            hooks = [h for e in listed["data"] for h in e["hooks"]]
            [guard] = [h for h in hooks if h["eventName"] == "preToolUse"]
            assert "hook leases CodexPreToolUse" in guard["command"]
            await raw.request("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "mergeStrategy": "upsert",
                                                               "value": {h["key"]: {"trusted_hash": h["currentHash"]} for h in hooks}}],
                                                    "reloadUserConfig": True}, timeout_ms=WAIT_MS)
            thread_id = (await raw.request("thread/start", {"cwd": repo}, timeout_ms=WAIT_MS))["thread"]["id"]

            stub.enqueue(patch_call(add_file("src/pkg/new.py"), "call_p1"),
                         function_call("exec_command", {"cmd": "echo hi > src/pkg/other.py"}, call_id="call_s1"),
                         function_call("exec_command", {"cmd": "cat src/a.py"}, call_id="call_r1"),
                         text("It is leased."))
            await run_turn(raw, thread_id)
            seen = outputs(stub)
            for call_id in ("call_p1", "call_s1"):
                assert "blocked by PreToolUse hook" in seen[call_id] and HOLDER in seen[call_id], seen
                assert "renaming the package" in seen[call_id]
            assert "blocked" not in seen["call_r1"]  # a read passes
            assert not Path(repo, "src", "pkg", "new.py").exists() and not Path(repo, "src", "pkg", "other.py").exists()

            release(app.store, HOLDER, root, ["src/pkg"], now_ms())
            stub.enqueue(patch_call(add_file("src/pkg/new.py"), "call_p2"), text("Written."))
            await run_turn(raw, thread_id)
            assert "blocked" not in outputs(stub)["call_p2"]
            assert await asyncio.to_thread(Path(repo, "src", "pkg", "new.py").read_text) == "print('hi')\n"
