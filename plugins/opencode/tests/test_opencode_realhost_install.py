"""What ``agent-link install opencode`` writes works in a REAL opencode (pinned ``opencode
serve``, stub model): the server loads agent-link's MCP server and its JS plugin from those
entries, and a session's call of ``message_agent`` is signed as that session, proven, though the
server asks for a password (``OPENCODE_SERVER_PASSWORD``) that only opencode was given: agent-link
reads it from the opencode process, install stores none.

If the program is missing this test fails with "run `make hosts`" -- it never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.opencode_host import _QUIET_ENV, OpencodeServer, opencode_binary

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))


async def test_opencode_installed_config_loads_the_tools_and_proves_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "opencode.json"
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run([AGENT_LINK, "install", "opencode", "--config", str(config)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    installed = json.loads(config.read_text())
    state = tmp_path / "state"
    with MessagesStub() as stub, OpencodeServer(stub.base_url, mcp=installed["mcp"], config_extra={"plugin": installed["plugin"]},
                                                env={"AGENT_LINK_STATE_DIR": str(state), "AGENT_LINK_PAIR_RATE": "0"},
                                                password="set-only-for-opencode") as server:
        session = server.request("POST", "/session", {"title": "installed"})
        stub.enqueue(Reply.tool_use("agent-link_message_agent", {"to": "test:bob", "message": "from an installed opencode"}), "sent")
        server.request("POST", f"/session/{session['id']}/prompt_async", {"parts": [{"type": "text", "text": "write to bob"}]})
        server.wait_for_reply(session["id"], timeout_s=90)
        assert "agent-link_message_agent" in stub.main_requests[0].tool_names()

    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(state))
    app = App.create()
    try:
        rows = app.store.conn.execute("SELECT * FROM messages WHERE from_addr = ?", (f"opencode:{session['id']}",)).fetchall()
        [message] = [app.mailbox.row_dict(r) for r in rows]
        assert message["body"] == "from an installed opencode"
        assert message["metadata"]["sender"] == {"source": "runtime_context", "verified": True}
    finally:
        await app.aclose()


def _debug_config(home: Path) -> dict[str, Any]:
    """The config the REAL opencode builds from ``home``'s global files (``opencode debug config``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "XDG_", "AGENT_LINK_"))}
    env.update(_QUIET_ENV, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / "oc-data"),
               XDG_CACHE_HOME=str(home / "cache"), XDG_STATE_HOME=str(home / "state"), NO_PROXY="127.0.0.1,localhost")
    (home / "work").mkdir(exist_ok=True)
    with MessagesStub() as stub:  # every outbound request (the npm install of plugins) refused at once
        env.update(HTTP_PROXY=stub.base_url, HTTPS_PROXY=stub.base_url)
        done = subprocess.run([str(opencode_binary()), "debug", "config"], capture_output=True, text=True, env=env,
                              cwd=home / "work", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def test_opencode_install_targets_the_file_whose_plugin_list_opencode_uses(tmp_path: Path) -> None:
    """opencode.jsonc's `plugin` list replaces opencode.json's in the REAL opencode: install edits
    the .jsonc, and opencode then loads agent-link's plugin and server; health says what opencode
    does, also when a .jsonc with comments hides the plugin again."""
    home = tmp_path / "home"
    folder = home / ".config" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text('{"plugin": ["from-opencode-json"]}\n')
    jsonc = folder / "opencode.jsonc"
    jsonc.write_text('{"plugin": ["opencode-wakatime"]}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "XDG_", "AGENT_LINK_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(tmp_path / "data"),
               AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([AGENT_LINK, "install", "opencode"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    uri = (tmp_path / "data" / "agent-link" / "host-plugins" / "opencode" / "agent-link.js").as_uri()
    seen = _debug_config(home)
    assert seen["plugin"] == ["opencode-wakatime", uri] and "agent-link" in seen["mcp"]

    jsonc.write_text('{\n  // mine\n  "plugin": ["opencode-wakatime"],\n}\n')
    (folder / "opencode.json").write_text(json.dumps({"plugin": [uri], "mcp": seen["mcp"]}))
    assert _debug_config(home)["plugin"] == ["opencode-wakatime"]
    health = subprocess.run([AGENT_LINK, "health", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(health.stdout)["harnesses"]["opencode"]["install"]["callerPlugin"] is False
