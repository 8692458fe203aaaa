"""The launcher's answers kept at install time, so even the first Codex thread has them.

The plugin's launcher (``host_plugin/hooks/agent-link.sh``) answers Codex's ``initialize`` and
first ``tools/list`` from what the last healthy agent-link server answered under the same
``AGENT_LINK_*`` values (a slow agent-link then cannot fail the thread); a server started
through the launcher keeps those answers (:mod:`agent_link_hostkit.fastfront`). Before any thread
ran there are none, so ``agent-link install codex`` starts the installed launcher once per MCP
revision that opens with ``initialize``, in the environment Codex will give it: the variables
the server declaration (``host_plugin/.codex-plugin/mcp.json``) passes through and sets.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

BOUND_S = 30.0  #: seconds one server start may take before that revision is left out
SERVER = Path(__file__).with_name("host_plugin") / ".codex-plugin" / "mcp.json"
CHECKED = "AGENT_LINK_MCP_CHECKED"  #: the launcher skips its start check for the executable it names


def codex_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as Codex hands it to the server: agent-link's variables only when the server
    declaration lists them (``env_vars``), plus the ones it sets (``env``)."""
    [spec] = json.loads(SERVER.read_text(encoding="utf-8"))["mcpServers"].values()
    passed = set(spec.get("env_vars", []))
    child = {k: v for k, v in env.items() if not k.startswith("AGENT_LINK_") or k in passed}
    child.update(spec.get("env", {}))
    return child


def _read_answer(proc: subprocess.Popen[bytes], request_id: int, deadline: float, key: str = "") -> bool:
    """Read the server's lines until the answer to ``request_id`` (True: a result, whose
    ``key`` member, when named, is not an empty list) or the deadline (False)."""
    assert proc.stdout is not None
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            return False
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == request_id:
                return isinstance(message.get("result"), dict) and message["result"].get(key, True) != []
    return False


def open_once(folder: Path, env: Mapping[str, str], revision: str) -> bool:
    """Start the launcher in ``folder`` as Codex does (``sh ./hooks/agent-link.sh mcp``), open
    an MCP session at ``revision`` and list the tools; True when the server answered both (it
    then kept them for the launcher: it keeps the server's own answers, so this waits for the
    server to finish starting). Never raises for a server that fails: False."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": revision, "capabilities": {},
                    "clientInfo": {"name": "agent-link-install", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    try:
        proc = subprocess.Popen(["sh", "./hooks/agent-link.sh", "mcp"], cwd=folder, env=dict(env),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return False
    assert proc.stdin is not None
    deadline = time.monotonic() + BOUND_S
    try:
        proc.stdin.write((json.dumps(lines[0]) + "\n").encode())
        proc.stdin.flush()
        if not _read_answer(proc, 1, deadline):
            return False
        proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines[1:]).encode())
        proc.stdin.flush()
        # the launcher's stand-in (no usable agent-link) lists no tools and keeps nothing
        return _read_answer(proc, 2, deadline, "tools")
    except OSError:
        return False
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def keep_opening_answers(folder: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """Open the installed server at ``folder`` once per handshake revision the MCP SDK knows
    (module docstring); returns the revisions it answered. A server that fails costs the first
    thread nothing more than before (it starts the server the slow way)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    child = codex_environment(os.environ if env is None else env)
    kept: list[str] = []
    for revision in HANDSHAKE_PROTOCOL_VERSIONS:  # one after the other: servers starting together on a new state dir wait on each other
        if open_once(folder, child, revision):
            kept.append(revision)
            # it started: the launcher need not check again that it starts (`agent-link mcp --check`)
            child[CHECKED] = installed_executable(folder)
    return kept


def installed_executable(folder: Path) -> str:
    """The executable the launcher in ``folder`` runs (its ``installed_bin`` line), or ``""``."""
    import shlex

    for line in (folder / "hooks" / "agent-link.sh").read_text(encoding="utf-8").splitlines():
        if line.startswith("installed_bin="):
            words = shlex.split(line.removeprefix("installed_bin="))
            return words[0] if words else ""
    return ""
