"""``agent-link approvals`` for opencode against the REAL pinned ``opencode serve`` (stub model).

The config is what ``agent-link install opencode`` writes, plus a user's ``"permission": {"*":
"ask"}`` (opencode asks before every tool). ``check --opencode-config`` exits 1 naming the
read-only tools; ``apply`` adds their exact keys with ``"allow"``; an opencode started with the
result runs a read-only agent-link tool with no permission request, while ``message_agent`` is
still held for the user's answer (``GET /permission`` lists the request). An agent with a
permission table of its own (``agent.<name>.permission``) is decided by that table first:
``apply`` extends it, and an agent whose own ``"*": "ask"`` came after the apply still asks
for a tool the top level allows; so does a markdown agent (``agent/<name>.md`` in opencode's
config folder) whose front matter says ``"*": ask`` (``check`` holds it back naming the file),
while one whose file allows the tool after that runs it unasked.

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(300)]

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))
TURN_TIMEOUT_S = 90.0


def agent_link(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENT_LINK, *args], capture_output=True, text=True, timeout=180)


def tool_call_outcome(server: OpencodeServer, stub: MessagesStub, tool: str, agent: str | None = None) -> tuple[str, list[Any]]:
    """A new session whose model (running as ``agent``, default opencode's own) calls ``tool``:
    ``(the tool part's status, pending permission requests)`` once the call completed or a
    permission request for it showed.

    It returns while the session's turn may still be running (the request after the tool's
    result, or a turn held by the permission question), so the session's replies are scripted
    for that session alone (its id is in the prompt): from the shared queue, that late request
    would take the next session's tool call."""
    session = server.request("POST", "/session", {"title": tool})["id"]
    stub.enqueue(Reply.tool_use(tool, {}), "done", conversation=session)
    body: dict[str, Any] = {"parts": [{"type": "text", "text": f"go ({session})"}], **({"agent": agent} if agent else {})}
    server.request("POST", f"/session/{session}/prompt_async", body)
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while True:
        asked = [p for p in server.request("GET", "/permission") or [] if p.get("sessionID") == session]
        parts = [p for m in server.session_messages(session) for p in m["parts"] if p.get("type") == "tool"]
        status = parts[0]["state"]["status"] if parts else "none"
        if asked or status in ("completed", "error"):
            return status, asked
        if time.monotonic() > deadline:
            sessions = [turn_record(server, stub, s["id"]) for s in server.request("GET", "/session")]
            raise AssertionError(f"{tool}: neither done nor asked within {TURN_TIMEOUT_S} s (status {status}) in "
                                 f"session {session}; {sessions}")
        time.sleep(0.2)


def turn_record(server: OpencodeServer, stub: MessagesStub, session: str) -> str:
    """What a session's turn did, for a failure message: each message's role, agent and parts,
    and each model request of the session (the agent prompt it carried, tool results, answer)."""
    messages = [(m["info"].get("role"), m["info"].get("agent"), [(p.get("type"), p.get("tool"), (p.get("state") or {}).get("status"))
                 for p in m["parts"] if p.get("type") in ("text", "tool")]) for m in server.session_messages(session)]
    requests = [([w for w in ("You ask.", "You open.") if w in r.system_text()], len(r.tool_results()),
                 [b.get("name") or b.get("text") for b in r.reply.blocks] if r.reply else None)
                for r in stub.main_requests if session in r.first_user_text()]
    return f"session {session}: messages {messages}; model requests {requests}"


def test_opencode_apply_lets_read_only_tools_run_unasked_and_others_still_ask(tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    installed = agent_link("install", "opencode", "--config", str(config))
    assert installed.returncode == 0, installed.stderr
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "permission": {"*": "ask"}}, indent=2) + "\n")

    checked = agent_link("approvals", "check", "--opencode-config", str(config), "--json")
    report = json.loads(checked.stdout)["opencode"]
    assert checked.returncode == 1 and "agent-link_list_agents" in report["missing"], checked.stdout
    assert "agent-link_message_agent" not in report["required"]
    applied = agent_link("approvals", "apply", "--opencode-config", str(config), "--json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    data = json.loads(config.read_text())
    assert data["permission"]["agent-link_list_agents"] == "allow" and list(data["permission"])[0] == "*"

    extra = {"plugin": data["plugin"], "permission": data["permission"]}
    with MessagesStub() as stub, OpencodeServer(stub.base_url, mcp=data["mcp"], config_extra=extra) as server:
        status, asked = tool_call_outcome(server, stub, "agent-link_list_agents")
        assert status == "completed" and asked == [], (status, asked)
        status, asked = tool_call_outcome(server, stub, "agent-link_message_agent")
        assert [a["permission"] for a in asked] == ["agent-link_message_agent"] and status != "completed", (status, asked)


def test_opencode_apply_covers_an_agent_with_its_own_permission_table(tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    installed = agent_link("install", "opencode", "--config", str(config))
    assert installed.returncode == 0, installed.stderr
    data = json.loads(config.read_text())
    agents = {"review": {"description": "reviews", "mode": "primary", "permission": {"*": "ask", "edit": "deny"}}}
    config.write_text(json.dumps({**data, "permission": {"*": "ask"}, "agent": agents}, indent=2) + "\n")

    checked = json.loads(agent_link("approvals", "check", "--opencode-config", str(config), "--json").stdout)["opencode"]
    review = next(a for a in checked["agents"] if a["agent"] == "review")
    assert "agent-link_list_agents" in review["missing"] and "agent-link_list_agents" in checked["missing"], checked
    applied = agent_link("approvals", "apply", "--opencode-config", str(config), "--json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    data = json.loads(config.read_text())
    assert data["agent"]["review"]["permission"]["agent-link_list_agents"] == "allow"
    # an agent added afterwards with its own wildcard: the top level's allow does not reach it
    data["agent"]["strict"] = {"description": "asks", "mode": "primary", "permission": {"*": "ask"}}

    extra = {"plugin": data["plugin"], "permission": data["permission"], "agent": data["agent"]}
    with MessagesStub() as stub, OpencodeServer(stub.base_url, mcp=data["mcp"], config_extra=extra) as server:
        status, asked = tool_call_outcome(server, stub, "agent-link_list_agents", agent="review")
        assert status == "completed" and asked == [], (status, asked)
        status, asked = tool_call_outcome(server, stub, "agent-link_list_agents", agent="strict")
        assert [a["permission"] for a in asked] == ["agent-link_list_agents"] and status != "completed", (status, asked)


def test_opencode_a_markdown_agents_own_table_decides_and_check_names_its_file(tmp_path: Path) -> None:
    root = tmp_path / "oc"
    folder = root / "xdg" / "config" / "opencode"  # opencode's global config folder under the test's XDG_CONFIG_HOME
    (folder / "agent").mkdir(parents=True)
    config = folder / "opencode.json"
    installed = agent_link("install", "opencode", "--config", str(config))
    assert installed.returncode == 0, installed.stderr
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "permission": {"*": "ask"}}, indent=2) + "\n")
    strict = folder / "agent" / "mdstrict.md"
    strict.write_text('---\ndescription: asks\nmode: primary\npermission:\n  "*": ask\n---\nYou ask.\n')
    (folder / "agent" / "mdopen.md").write_text('---\ndescription: opens\nmode: primary\npermission:\n  "*": ask\n'
                                                '  agent-link_list_agents: allow\n---\nYou open.\n')
    applied = agent_link("approvals", "apply", "--opencode-config", str(config), "--json")
    report = json.loads(applied.stdout)["opencode"]
    assert applied.returncode == 1 and "agent-link_list_agents" in report["added"], report  # the top level is fixed
    agents = {a["agent"]: a for a in report["agents"]}
    assert ("agent-link_list_agents", str(strict), "layer") in [(h["key"], h["from"], h["why"]) for h in agents["mdstrict"]["heldBack"]]
    assert "agent-link_list_agents" not in [h["key"] for h in agents["mdopen"]["heldBack"]]
    data = json.loads(config.read_text())

    extra = {"plugin": data["plugin"], "permission": data["permission"]}
    with MessagesStub() as stub, OpencodeServer(stub.base_url, mcp=data["mcp"], config_extra=extra, root=root) as server:
        status, asked = tool_call_outcome(server, stub, "agent-link_list_agents")  # opencode's own agent: the top level
        assert status == "completed" and asked == [], (status, asked)
        # the held turn first: its closing reply stays scripted while mdopen's session runs
        status, asked = tool_call_outcome(server, stub, "agent-link_list_agents", agent="mdstrict")
        assert [a["permission"] for a in asked] == ["agent-link_list_agents"] and status != "completed", (
            status, asked, [turn_record(server, stub, s["id"]) for s in server.request("GET", "/session")])
        status, asked = tool_call_outcome(server, stub, "agent-link_list_agents", agent="mdopen")
        assert status == "completed" and asked == [], (status, asked)


def test_opencode_merged_layers_match_opencode_debug_config(tmp_path: Path) -> None:
    """A layered setup (two global files, one of them JSONC, the other starting with a BOM; a project JSONC file with a trailing
    comma; a ``.opencode`` folder below it; ``OPENCODE_CONFIG_CONTENT``; a markdown agent):
    agent-link's merged tables equal ``opencode debug config``'s, key order included, and
    ``check --real-opencode`` decides each tool as the ruleset ``opencode debug agent`` prints
    (the last matching rule), naming the layer of each deciding key."""
    from agent_link_approvals import opencode, opencode_layers
    from agent_link_testing.opencode_host import opencode_binary

    root = tmp_path / "oc"
    xdg = {name: root / "xdg" / name.split("_")[1].lower() for name in
           ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")}
    home, work = root / "home", root / "work"
    for d in (home, *xdg.values()):
        d.mkdir(parents=True)
    (work / "sub" / ".opencode").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    folder = xdg["XDG_CONFIG_HOME"] / "opencode"
    (folder / "agent").mkdir(parents=True)
    (folder / "opencode.json").write_text("\ufeff" + json.dumps({
        "permission": {"agent-link_list_agents": "allow", "*": "allow", "agent-link_wait_for_agent": "ask"},
        "agent": {"review": {"description": "reviews", "mode": "primary", "permission": {"*": "ask"}}}}, indent=2))
    (folder / "opencode.jsonc").write_text('{\n  // the second global file\n  "permission": {"agent-link_wait_for_agent": "deny"},\n}\n')
    (folder / "agent" / "mdask.md").write_text('---\ndescription: asks\nmode: primary\npermission:\n  "*": ask\n'
                                               '  agent-link_agent_link_health: allow\n---\nYou ask.\n')
    project = work / "opencode.jsonc"
    project.write_text('{\n  /* the project */ "permission": {"*": "ask", "edit": "allow",},\n}\n')
    below = work / "sub" / ".opencode" / "opencode.json"
    below.write_text(json.dumps({"agent": {"review": {"permission": {"agent-link_list_agents": "allow"}}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "AGENT_LINK_", "XDG_"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update({k: str(v) for k, v in xdg.items()}, HOME=str(home), OPENCODE_DISABLE_AUTOUPDATE="1",
               OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",  # nothing leaves the machine
               OPENCODE_CONFIG_CONTENT=json.dumps({"permission": {"agent-link_agent_link_health": "allow"}}))
    cwd = work / "sub"
    ours = opencode_layers.merge(opencode_layers.real_layers(env, cwd), env)  # before opencode adds "$schema" to the files

    def debug(*args: str) -> Any:
        done = subprocess.run([str(opencode_binary()), "debug", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    theirs = debug("config")
    assert list(theirs["permission"].items()) == list(ours.data["permission"].items())
    for name in ("review", "mdask"):
        assert list(theirs["agent"][name]["permission"].items()) == list(ours.data["agent"][name]["permission"].items()), name
    assert ours.source("permission", "*") == str(project) and ours.source("permission", "agent-link_wait_for_agent") == str(folder / "opencode.jsonc")
    assert ours.source("agent", "review", "permission", "agent-link_list_agents") == str(below)

    checked = subprocess.run([AGENT_LINK, "approvals", "check", "--real-opencode", "--json"], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=180)
    report = json.loads(checked.stdout)["opencode"]
    assert checked.returncode == 1, checked.stdout + checked.stderr
    for agent in ("build", "review", "mdask"):
        rules = debug("agent", agent)["permission"]
        for row in report["tools"]:
            last = [r["action"] for r in rules if opencode._matches(r["permission"], row["key"]) and opencode._matches(r["pattern"], "*")]
            decision = row.get("agents", {}).get(agent, row["decision"])
            assert (last[-1] if last else "ask") == ("allow" if decision == "none" else decision), (agent, row, rules)
    rows = {row["key"]: row for row in report["tools"]}
    assert rows["agent-link_list_agents"]["from"] == str(project) and rows["agent-link_agent_link_health"]["from"] == "OPENCODE_CONFIG_CONTENT"
