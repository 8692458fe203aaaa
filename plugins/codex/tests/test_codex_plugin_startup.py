"""The Codex plugin's MCP server declaration (``.codex-plugin/mcp.json``).

Codex gives an MCP server's process only the variables the declaration names in ``env_vars``
(verified on the pinned Codex by ``test_codex_realhost_install``), so every variable agent-link
reads must be named there, or a setting made in the shell silently misses Codex's server: that
is walked for every host by ``tests/test_host_server_env.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.codex_host import REPO_ROOT
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError



def declaration() -> dict:
    return json.loads((REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / ".codex-plugin" / "mcp.json").read_text())["mcpServers"]["codex-agent-link"]


def test_the_server_is_required() -> None:
    """Codex builds the first turn without an optional server it has not listed within about a
    second; a required one it waits for. (Required, a server that fails to start fails the
    thread: the launcher then stands in, see below.)"""
    assert declaration()["required"] is True


# -- the launcher when agent-link is missing or cannot run (issue 25) ---------------------
# Both host plugins ship this launcher byte for byte (plugins/claude/tests/test_claude_packaging.py).

LAUNCHER = REPO_ROOT / "plugins" / "codex" / "agent_link_codex" / "host_plugin" / "hooks" / "agent-link.sh"
BARE_PATH = "/usr/bin:/bin"  # sh and awk, no agent-link


def launcher_copy(tmp_path: Path, installed: str | None = None) -> Path:
    copy = tmp_path / "agent-link.sh"
    text = LAUNCHER.read_text()
    if installed is not None:
        text = text.replace("installed_bin=''", f"installed_bin='{installed}'", 1)
    copy.write_text(text)
    return copy


async def open_stand_in(launcher: Path, errlog: Any) -> tuple[Any, Any, Any]:
    params = StdioServerParameters(command="sh", args=[str(launcher), "mcp"], env={"PATH": BARE_PATH})
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        with pytest.raises(MCPError) as refused:
            await session.call_tool("agent_link_health", {})
        return init, listed, refused.value


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["missing", "interpreter-gone"])
async def test_without_a_usable_agent_link_the_launcher_answers_with_no_tools(tmp_path: Path, case: str) -> None:
    if case == "missing":
        launcher, expected = launcher_copy(tmp_path, str(tmp_path / "gone" / "agent-link")), "executable not found"
    else:  # what a deleted virtualenv leaves: the entry script, its Python gone
        script = tmp_path / "venv" / "bin" / "agent-link"
        script.parent.mkdir(parents=True)
        script.write_text(f"#!{tmp_path / 'venv' / 'bin' / 'python'}\nprint('never')\n")
        script.chmod(0o755)
        launcher, expected = launcher_copy(tmp_path, str(script)), f"its interpreter {tmp_path / 'venv' / 'bin' / 'python'} is missing"
    with (tmp_path / "stderr").open("w+") as errlog:
        init, listed, refused = await open_stand_in(launcher, errlog)
        errlog.seek(0)
        logged = errlog.read()
    assert init.server_info.name == "agent-link" and init.server_info.version == "unavailable"
    assert expected in init.instructions and listed.tools == []
    assert refused.error.code == -32601 and expected in refused.error.message
    assert "agent-link: " in logged and expected in logged and "runs without agent-link" in logged


def test_the_stand_in_finds_the_request_id_wherever_it_is(tmp_path: Path) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": "s-1", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "id": 9}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"method": "tools/list", "params": {"cursor": None, "_meta": {"id": 3}}, "jsonrpc": "2.0", "id": 41},
        {"jsonrpc": "2.0", "id": -2, "method": "ping"},
    ]
    done = subprocess.run(["sh", str(launcher_copy(tmp_path)), "mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, env={"PATH": BARE_PATH}, timeout=30, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["s-1", 41, -2]
    assert answers[0]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[1]["result"] == {"tools": []} and answers[2]["result"] == {}


def test_a_hook_without_agent_link_says_nothing_and_succeeds(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(launcher_copy(tmp_path)), "hook", "codex", "UserPromptSubmit"], input='{"prompt": "hi"}',
                          capture_output=True, text=True, env={"PATH": BARE_PATH}, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_other_commands_without_agent_link_fail_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(launcher_copy(tmp_path)), "health"], capture_output=True, text=True,
                          env={"PATH": BARE_PATH}, timeout=30, check=False)
    assert done.returncode == 127 and "executable not found" in done.stderr and done.stdout == ""


def test_a_usable_agent_link_is_run(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(launcher_copy(tmp_path, str(Path(sys.executable).with_name("agent-link")))), "--version"],
                          capture_output=True, text=True, env={"PATH": BARE_PATH, "HOME": str(tmp_path)}, timeout=60,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


# -- the launcher when agent-link is slow: the opening answered from the kept answers ---------

RECORDER = """#!/bin/sh
printf '%s' "${AGENT_LINK_MCP_OPENED-unset}" >"$0.opened"
printf '%s' "${AGENT_LINK_MCP_LAUNCHER_CACHE-unset}" >"$0.cache"
cat >"$0.rest"
"""
INIT = {"jsonrpc": "2.0", "id": "s-1", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LISTING = {"method": "tools/list", "params": {"_meta": {"id": 3}}, "jsonrpc": "2.0", "id": 41}
PING = {"jsonrpc": "2.0", "id": -2, "method": "ping"}
KEPT_INIT = {"result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "agent-link", "version": "9"}}}
KEPT_LIST = {"result": {"tools": [{"name": "list_agents", "inputSchema": {"type": "object"}}]}}


def run_recorded(tmp_path: Path, lines: list[dict[str, Any]], host: str = "codex") -> tuple[list[dict[str, Any]], Path]:
    """Run the launcher for ``mcp`` with a recording agent-link; its answers and the recorder."""
    recorder = tmp_path / "bin" / "agent-link"
    recorder.parent.mkdir(exist_ok=True)
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    done = subprocess.run(["sh", str(launcher_copy(tmp_path, str(recorder))), "mcp"],
                          input="".join(json.dumps(m) + "\n" for m in lines), capture_output=True, text=True,
                          env={"PATH": BARE_PATH, "HOME": str(tmp_path / "home"), "AGENT_LINK_HOST": host},
                          timeout=60, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()], recorder


def kept_folder(tmp_path: Path) -> Path:
    """The folder the launcher answers from for these settings (a first run names it)."""
    answers, recorder = run_recorded(tmp_path, [])
    assert answers == []
    folder = Path(recorder.with_suffix(".cache").read_text())
    assert folder.parent == tmp_path / "home" / ".cache" / "agent-link" / "launcher"
    return folder


def keep(folder: Path, name: str, answer: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(answer)[1:-1])


def test_without_kept_answers_agent_link_gets_the_whole_connection(tmp_path: Path) -> None:
    kept_folder(tmp_path)
    answers, recorder = run_recorded(tmp_path, [INIT, INITIALIZED, LISTING])
    assert answers == [] and recorder.with_suffix(".opened").read_text() == "unset"
    assert [json.loads(line) for line in recorder.with_suffix(".rest").read_text().splitlines()] == [INIT, INITIALIZED, LISTING]


def test_with_kept_answers_the_launcher_answers_the_opening_and_hands_the_lines_on(tmp_path: Path) -> None:
    folder = kept_folder(tmp_path)
    keep(folder, "initialize-2025-06-18", KEPT_INIT)
    keep(folder, "tools-list-2025-06-18", KEPT_LIST)
    answers, recorder = run_recorded(tmp_path, [INIT, INITIALIZED, LISTING, PING])
    assert answers == [{"jsonrpc": "2.0", "id": "s-1", **KEPT_INIT}, {"jsonrpc": "2.0", "id": 41, **KEPT_LIST}]
    opened = recorder.with_suffix(".opened").read_text().split("\n")
    assert [(mark, json.loads(line)) for mark, _, line in (o.partition(" ") for o in opened)] == [
        ("1", INIT), ("0", INITIALIZED), ("1", LISTING)]
    assert [json.loads(line) for line in recorder.with_suffix(".rest").read_text().splitlines()] == [PING]


@pytest.mark.parametrize("case", ["other-revision", "other-request", "no-method", "tools-list-page"])
def test_what_the_launcher_cannot_answer_is_handed_on_unanswered(tmp_path: Path, case: str) -> None:
    folder = kept_folder(tmp_path)
    keep(folder, "initialize-2025-06-18", KEPT_INIT)
    keep(folder, "tools-list-2025-06-18", KEPT_LIST)
    if case == "other-revision":
        first = {**INIT, "params": {**INIT["params"], "protocolVersion": "2025-11-25"}}
        lines, expected_answers, expected_opened = [first, INITIALIZED], [], [("0", first)]
    elif case == "other-request":
        lines, expected_answers, expected_opened = [PING, INIT], [], [("0", PING)]
    elif case == "no-method":  # a line without a method (a response) after the answered initialize
        odd = {"jsonrpc": "2.0", "id": 5, "result": {}}
        lines, expected_answers = [INIT, odd, LISTING], [{"jsonrpc": "2.0", "id": "s-1", **KEPT_INIT}]
        expected_opened = [("1", INIT), ("0", odd)]
    else:  # a later page of tools/list: the server's
        page = {**LISTING, "params": {"cursor": "2"}}
        lines, expected_answers = [INIT, INITIALIZED, page], [{"jsonrpc": "2.0", "id": "s-1", **KEPT_INIT}]
        expected_opened = [("1", INIT), ("0", INITIALIZED), ("0", page)]
    answers, recorder = run_recorded(tmp_path, lines)
    assert answers == expected_answers
    opened = recorder.with_suffix(".opened").read_text().split("\n")
    assert [(mark, json.loads(line)) for mark, _, line in (o.partition(" ") for o in opened)] == expected_opened
    rest = [json.loads(line) for line in recorder.with_suffix(".rest").read_text().splitlines()]
    assert rest == lines[len(expected_opened):]


def test_only_codex_gets_answers_from_the_launcher(tmp_path: Path) -> None:
    # Claude Code does not wait for its servers: agent-link answers the whole connection itself
    folder = kept_folder(tmp_path)
    keep(folder, "initialize-2025-06-18", KEPT_INIT)
    keep(folder, "tools-list-2025-06-18", KEPT_LIST)
    answers, recorder = run_recorded(tmp_path, [INIT, INITIALIZED, LISTING], host="claude")
    assert answers == [] and recorder.with_suffix(".opened").read_text() == "unset"
    assert recorder.with_suffix(".cache").read_text() == "unset"


@pytest.mark.anyio
async def test_a_slow_agent_link_behind_the_launcher_answers_a_real_client_session(tmp_path: Path) -> None:
    """The real agent-link through the launcher and an MCP SDK client: a first start keeps its
    opening answers; a second, slowed by 3 s, has the opening answered by the launcher, its
    tool call answered by agent-link once it is up, and says it was late on stderr."""
    agent_link = Path(sys.executable).with_name("agent-link")
    slow = tmp_path / "slow-agent-link"
    slow.write_text(f'#!/bin/sh\nsleep 3\nexec "{agent_link}" "$@"\n')
    slow.chmod(0o755)
    launcher = launcher_copy(tmp_path, str(agent_link))
    env = {"PATH": BARE_PATH, "HOME": str(tmp_path / "home"), "AGENT_LINK_HOST": "codex",
           "AGENT_LINK_STATE_DIR": str(tmp_path / "state")}

    async def session(extra: dict[str, str], errlog: Any) -> tuple[Any, Any, Any]:
        params = StdioServerParameters(command="sh", args=[str(launcher), "mcp"], env={**env, **extra})
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            listed = await client.list_tools()
            health = await client.call_tool("agent_link_health", {})
            return init, listed, health

    with (tmp_path / "stderr").open("w+") as errlog:
        first = await session({}, errlog)
        kept = list((tmp_path / "home" / ".cache" / "agent-link" / "launcher").iterdir())
        assert [sorted(p.name for p in folder.iterdir()) for folder in kept] == [
            [f"initialize-{first[0].protocol_version}", f"tools-list-{first[0].protocol_version}"]]
        errlog.seek(0)
        errlog.truncate()
        second = await session({"AGENT_LINK_BIN": str(slow)}, errlog)
        errlog.seek(0)
        logged = errlog.read()
    assert second[0].server_info == first[0].server_info and second[0].instructions == first[0].instructions
    assert [t.name for t in second[1].tools] == [t.name for t in first[1].tools]
    assert not second[2].is_error and '"ok": true' in second[2].content[0].text
    assert "agent-link: the server started" in logged and "after the host opened the connection" in logged, logged


# -- agent-link that crashes at start, kept answers cut short -----------------------------------

CRASHING = "#!{python}\nimport agent_link_module_that_is_missing\n"  # its interpreter is there: usable() passes it


def crashing_agent_link(tmp_path: Path) -> Path:
    script = tmp_path / "broken" / "agent-link"
    script.parent.mkdir(parents=True)
    script.write_text(CRASHING.format(python=sys.executable))
    script.chmod(0o755)
    return script


def run_launcher(launcher: Path, lines: list[dict[str, Any]], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(launcher), "mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, timeout=60, check=True,
                          env={"PATH": BARE_PATH, "HOME": str(home), "AGENT_LINK_HOST": "codex"})


@pytest.mark.parametrize("case", ["nothing-kept", "other-revision-kept"])
def test_an_agent_link_that_crashes_at_start_is_stood_in_for(tmp_path: Path, case: str) -> None:
    """Codex fails the thread when its required server closes the connection before answering
    ``initialize`` ("handshaking with MCP server failed: connection closed"): with no kept
    answers to open from, the launcher checks that agent-link starts and stands in when not,
    answering every line it read, those read before the check included."""
    broken = crashing_agent_link(tmp_path)
    if case == "other-revision-kept":  # the launcher reads the initialize line before it knows
        folder = kept_folder(tmp_path)
        keep(folder, "initialize-2025-03-26", KEPT_INIT)
        keep(folder, "tools-list-2025-03-26", KEPT_LIST)
    done = run_launcher(launcher_copy(tmp_path, str(broken)), [INIT, INITIALIZED, LISTING, PING], tmp_path / "home")
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["s-1", 41, -2], done.stdout
    why = answers[0]["result"]["instructions"]
    assert answers[0]["result"]["serverInfo"]["version"] == "unavailable" and answers[1]["result"] == {"tools": []}
    assert f"agent-link at {broken} failed to start" in why and "agent_link_module_that_is_missing" in why, why
    assert f"run '{broken} mcp --check' to see the error" in why and "agent-link install codex" in why, why
    assert f"agent-link at {broken} failed to start" in done.stderr, done.stderr


def test_an_agent_link_whose_check_hangs_is_stood_in_for_in_time(tmp_path: Path) -> None:
    """A check that never ends (a database lock held, an import that hangs) would keep the thread
    past Codex's start-up timeout (10 s by default): it is ended after the launcher's bound (6 s)
    and the stand-in answers, saying so; the check is not left running."""
    hung = tmp_path / "hung" / "agent-link"
    hung.parent.mkdir()
    hung.write_text(f"#!/bin/sh\necho $$ >'{tmp_path}/check.pid'\nexec sleep 120\n")
    hung.chmod(0o755)
    done = run_launcher(launcher_copy(tmp_path, str(hung)), [INIT, INITIALIZED, LISTING], tmp_path / "home")
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["s-1", 41] and answers[1]["result"] == {"tools": []}, done.stdout
    why = answers[0]["result"]["instructions"]
    assert f"agent-link at {hung} did not start within 6 s" in why and f"run '{hung} mcp --check'" in why, why
    pid = int((tmp_path / "check.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


CALLS_RECORDER = '#!/bin/sh\necho "$*" >>"$0.calls"\n[ "$*" = "mcp --check" ] && exit 0\ncat >"$0.rest"\n'


def run_calls_recorded(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[str, list[str], Path]:
    """Run the launcher for Codex's ``mcp`` with an agent-link that records how it was called."""
    recorder = tmp_path / "calls" / "agent-link"
    recorder.parent.mkdir(exist_ok=True)
    recorder.write_text(CALLS_RECORDER)
    recorder.chmod(0o755)
    done = run_launcher(launcher_copy(tmp_path, str(recorder)), lines, tmp_path / "home")
    return done.stdout, recorder.with_suffix(".calls").read_text().splitlines(), recorder


def test_without_kept_answers_agent_link_is_checked_then_execed(tmp_path: Path) -> None:
    """No kept answers: the check (``mcp --check``), then the server itself, which gets the
    whole connection."""
    out, calls, recorder = run_calls_recorded(tmp_path, [INIT, LISTING])
    assert out == "" and calls == ["mcp --check", "mcp"]
    assert [json.loads(line) for line in recorder.with_suffix(".rest").read_text().splitlines()] == [INIT, LISTING]


def test_kept_answers_are_answered_from_without_the_check(tmp_path: Path) -> None:
    """The fast path stays fast: with whole kept answers, no ``mcp --check``."""
    folder = kept_folder(tmp_path)
    keep(folder, "initialize-2025-06-18", KEPT_INIT)
    keep(folder, "tools-list-2025-06-18", KEPT_LIST)
    out, calls, _ = run_calls_recorded(tmp_path, [INIT, INITIALIZED, LISTING])
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["s-1", 41] and calls == ["mcp"]


@pytest.mark.parametrize("cut", ["initialize", "tools-list", "garbled", "empty"])
def test_a_kept_answer_that_is_not_whole_is_not_answered_from(tmp_path: Path, cut: str) -> None:
    """A kept answer cut short (a full disk, a crash while copying the cache) would go to
    Codex as the ``initialize`` answer, invalid JSON: such files are not answered from; the
    server gets every line and answers them itself."""
    folder = kept_folder(tmp_path)
    keep(folder, "initialize-2025-06-18", KEPT_INIT)
    keep(folder, "tools-list-2025-06-18", KEPT_LIST)
    whole = (folder / f"{'tools-list' if cut == 'tools-list' else 'initialize'}-2025-06-18").read_text()
    spoilt = {"initialize": whole[:40], "tools-list": whole[:-2] + "}", "garbled": whole.replace('"', "", 1),
              "empty": ""}[cut]
    (folder / f"{'tools-list' if cut == 'tools-list' else 'initialize'}-2025-06-18").write_text(spoilt)
    answers, recorder = run_recorded(tmp_path, [INIT, INITIALIZED, LISTING])
    assert answers == []
    opened = recorder.with_suffix(".opened").read_text().split("\n")
    assert [(mark, json.loads(line)) for mark, _, line in (o.partition(" ") for o in opened)] == [("0", INIT)]
    assert [json.loads(line) for line in recorder.with_suffix(".rest").read_text().splitlines()] == [INITIALIZED, LISTING]


def test_install_skips_the_check_for_the_executable_it_checked(tmp_path: Path) -> None:
    """``agent-link install codex`` opens the server once per revision; after the first it names
    the executable in AGENT_LINK_MCP_CHECKED, which spares the launcher's check for that
    executable only and is never handed on (nor in the kept answers' key)."""
    from agent_link_codex.opening import CHECKED, installed_executable

    recorder = tmp_path / "calls" / "agent-link"
    recorder.parent.mkdir()
    recorder.write_text(CALLS_RECORDER + 'env >"$0.env"\n')
    recorder.chmod(0o755)
    launcher = launcher_copy(tmp_path, str(recorder))
    for value, calls in ((str(recorder), ["mcp"]), ("/elsewhere/agent-link", ["mcp --check", "mcp"])):
        recorder.with_suffix(".calls").unlink(missing_ok=True)
        subprocess.run(["sh", str(launcher), "mcp"], input=json.dumps(INIT) + "\n", capture_output=True, text=True,
                       timeout=60, check=True, env={"PATH": BARE_PATH, "HOME": str(tmp_path / "home"),
                                                    "AGENT_LINK_HOST": "codex", CHECKED: value})
        assert recorder.with_suffix(".calls").read_text().splitlines() == calls
        assert CHECKED not in recorder.with_suffix(".env").read_text()
    hooks = tmp_path / "folder" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "agent-link.sh").write_text(launcher.read_text().replace(f"installed_bin='{recorder}'", "installed_bin='/a b/agent-link'"))
    assert installed_executable(tmp_path / "folder") == "/a b/agent-link"


def test_a_last_line_without_its_newline_is_stood_in_for_too(tmp_path: Path) -> None:
    broken = crashing_agent_link(tmp_path)
    folder = kept_folder(tmp_path)
    keep(folder, "initialize-2025-03-26", KEPT_INIT)
    keep(folder, "tools-list-2025-03-26", KEPT_LIST)
    done = subprocess.run(["sh", str(launcher_copy(tmp_path, str(broken))), "mcp"], input=json.dumps(INIT),
                          capture_output=True, text=True, timeout=60, check=True,
                          env={"PATH": BARE_PATH, "HOME": str(tmp_path / "home"), "AGENT_LINK_HOST": "codex"})
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == ["s-1"], done.stdout
