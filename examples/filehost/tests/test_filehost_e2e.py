"""The example plugin end to end, as installed by ``make install``: sessions listed, a
message delivered into a session's file, a reply back, its tool through a real MCP client
and its command through the CLI. Only this plugin and the waits plugin are loaded (AGENT_LINK_LOAD_PLUGINS)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.mcp_client import agent_link_mcp

ONLY_ME = {"AGENT_LINK_LOAD_PLUGINS": "filehost waits"}  # waits: wait_for_agent (plugins/waits)


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_link_core", *args], capture_output=True, text=True,
                          env={**os.environ, **ONLY_ME, **env}, timeout=120, check=False)


def test_filehost_is_an_installed_plugin() -> None:
    out = cli("plugins", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert sorted(data["loaded"]) == ["filehost", "waits"] and data["problems"] == []
    assert "filehost" in cli("--help").stdout  # plugin commands are listed with the core's


def test_filehost_declares_exactly_the_hooks_it_implements() -> None:
    """The package's AGENT_LINK_HOOKS (read by the CLI without importing the plugin) is what
    registration finds in the entry module (docs/plugins.md, "Which hooks the entry module implements")."""
    import agent_link_filehost
    import agent_link_filehost.plugin
    from agent_link_core import lazy

    real = set(lazy.module_hooks(agent_link_filehost.plugin))
    assert set(agent_link_filehost.AGENT_LINK_HOOKS["agent_link_filehost.plugin"]) == real


def test_filehost_declares_exactly_the_settings_and_migrations_it_registers() -> None:
    """The package's AGENT_LINK_SETTINGS and AGENT_LINK_SCHEMA (read by the CLI instead of
    importing the plugin) are what its hooks register (docs/plugins.md, "Settings,
    migrations and harnesses as data")."""
    import agent_link_filehost
    from agent_link_filehost import plugin
    from agent_link_core.config import Setting

    fields = ("name", "kind", "default", "aliases", "minimum", "maximum", "choices", "warning", "doc")
    registered: list[Setting] = []
    plugin.agent_link_register_settings(registered.append)
    declared = [Setting(**d) for d in agent_link_filehost.AGENT_LINK_SETTINGS["agent_link_filehost.plugin"]]
    assert [[getattr(s, f) for f in fields] for s in declared] == [[getattr(s, f) for f in fields] for s in registered]
    schema = agent_link_filehost.AGENT_LINK_SCHEMA["agent_link_filehost.plugin"]
    assert sorted((o, v) for o, vs in schema.items() for v in vs) == sorted((m.owner, m.version) for m in plugin.agent_link_schema())


def test_filehost_declares_exactly_the_harness_it_registers() -> None:
    """The package's AGENT_LINK_HARNESSES (read by every command instead of importing the
    plugin) is the HarnessDeclaration its hook registers, field by field."""
    import agent_link_filehost
    from agent_link_filehost import plugin
    from agent_link_core.harness_decl import HarnessDeclaration

    registered: list[HarnessDeclaration] = []
    plugin.agent_link_register_harnesses(registered.append)
    assert [HarnessDeclaration(**d) for d in agent_link_filehost.AGENT_LINK_HARNESSES["agent_link_filehost.plugin"]] == registered


@pytest.mark.anyio
async def test_filehost_sessions_send_deliver_and_reply(isolated_env: Path) -> None:
    assert cli("filehost", "add", "alice", "--title", "Alice's session").returncode == 0
    added = cli("filehost", "add", "bob", "--title", "Bob's session")
    assert added.returncode == 0 and added.stdout.strip() == "filehost:bob"
    listed = cli("filehost", "list")
    assert "filehost:alice  Alice's session" in listed.stdout and "filehost:bob" in listed.stdout

    async with agent_link_mcp({**ONLY_ME, "FILEHOST_SESSION": "alice"}) as alice:
        assert "filehost_sessions" in await alice.tools()
        tool = await alice.call("filehost_sessions")
        assert {s["address"] for s in tool["sessions"]} == {"filehost:alice", "filehost:bob"} and tool["complete"]
        agents = await alice.call("list_agents")
        assert {"filehost:alice", "filehost:bob"} <= {s["address"] for s in agents["sessions"]}
        found = await alice.call("resolve_agent", {"query": "Bob's"})
        assert found["status"] == "resolved" and found["best"]["address"] == "filehost:bob"

        sent = await alice.call("message_agent", {"to": "filehost:bob", "message": "Is the build green?", "anticipation": "reply"})
        assert sent["ok"] and sent["delivery"] == "delivered" and sent["deliveredVia"] == "filehost-file", sent
        assert sent["inboxFile"] == "bob.txt"  # a result field the harness declares
        inbox_file = isolated_env / "filehost" / "inbox" / "bob.txt"
        text = inbox_file.read_text()
        assert f'<agent-link-message id="{sent["messageId"]}" from="filehost:alice"' in text
        # a variable names the sender; this example host has no process that could prove it
        assert 'fromVerified="false"' in text and "Is the build green?" in text

        async with agent_link_mcp({**ONLY_ME, "FILEHOST_SESSION": "bob"}) as bob:
            replied = await bob.call("reply_agent_link_message", {"messageId": sent["messageId"], "message": "Yes, green."})
            assert replied["ok"] and replied["delivery"] == "delivered", replied

        waited = await alice.call("wait_for_agent", {"agent": "filehost:bob", "replyToMessageId": sent["messageId"], "timeoutMs": 30000})
        # the reply was appended to alice's file already: the wait names it, and does not repeat it
        assert waited["outcome"] == "reply" and waited["reply"]["id"] == replied["messageId"], waited
        assert waited["reply"]["alreadyDelivered"]["via"] == "filehost-file" and "envelope" not in waited["reply"]
        assert "Yes, green." in (isolated_env / "filehost" / "inbox" / "alice.txt").read_text()
        health = await alice.call("agent_link_health")
        assert health["address"] == "filehost:alice" and health["sections"]["filehost"]["delivered"] == 2

    # the CLI reads mail only as a proved session: a variable names alice but proves nothing
    refused = cli("status", sent["messageId"], "--json", FILEHOST_SESSION="alice")
    assert refused.returncode != 0 and "Only filehost:alice may read its mail here" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    status = cli("status", sent["messageId"], "--json", AGENT_LINK_ADDRESS="filehost:alice")  # the user's own choice
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "replied", status.stdout + status.stderr


def test_filehost_unreadable_sessions_file_is_an_incomplete_listing(isolated_env: Path) -> None:
    (isolated_env / "filehost").mkdir(parents=True)
    (isolated_env / "filehost" / "sessions.json").write_text("{not json")
    out = cli("sessions", "--json", AGENT_LINK_LOAD_PLUGINS="filehost listings")  # `sessions` is the listings plugin's
    assert out.returncode == 0, out.stderr
    provider = json.loads(out.stdout)["providers"]["filehost"]
    assert provider["complete"] is False and provider["reason"] == "sessions_file_unreadable"
