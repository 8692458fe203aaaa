"""`make bench`: how soon ``agent-link mcp`` has listed its tools, and what the list costs.

* spawn to ``tools/list`` answered: ``agent-link mcp`` (its start-up cache filled by one
  earlier start) against a minimal MCP-SDK server (one tool, the SDK's stdio transport), run
  alternately in the same run; target ratio <= 0.25;
* the same through the Codex plugin's launcher (``hooks/agent-link.sh``, ``AGENT_LINK_HOST=codex``),
  which answers the opening from the answers an earlier server kept for it, against
  ``agent-link mcp`` run directly with the same environment, alternately; target ratio <= 1.0
  (the launcher must not make a Codex thread wait longer than agent-link itself would);
* the ``tools/list`` answer's size in bytes for each tool profile (``AGENT_LINK_TOOLS``), and
  (section ``tools_list``) the default one each host receives.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 11
REVISION = "2025-06-18"

MINIMAL_SERVER = '''
import anyio, mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

async def on_list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="ping", input_schema={"type": "object"})])

async def on_call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])

async def main():
    server = Server("minimal", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
'''


def _line(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def opening_ms(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Spawn ``cmd``, open an MCP connection; ms from spawn until ``tools/list`` was answered,
    and the answer's size in bytes (its JSON line)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": REVISION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}))
    proc.stdin.flush()
    proc.stdout.readline()
    proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"})
                     + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    proc.stdin.flush()
    answer = proc.stdout.readline()
    elapsed = (time.perf_counter() - start) * 1000
    proc.stdin.close()
    proc.wait(120)
    return elapsed, len(answer)


def bench_mcp_start(tmp: Path, line) -> None:  # type: ignore[no-untyped-def]
    """Print the start-up line and the tools/list sizes (``line`` is bench/run.py's printer)."""
    env = dict(os.environ, HOME=str(tmp), AGENT_LINK_STATE_DIR=str(tmp / "mcp-state"), XDG_CACHE_HOME=str(tmp / "cache"))
    minimal = tmp / "minimal_mcp_server.py"
    minimal.write_text(MINIMAL_SERVER)
    agent_link = [str(Path(sys.executable).with_name("agent-link")), "mcp"]
    baseline = [sys.executable, str(minimal)]
    opening_ms(agent_link, env)  # the first start fills the cache (and warms the page cache)
    opening_ms(baseline, env)
    ours, theirs = [], []
    for _ in range(RUNS):
        ours.append(opening_ms(agent_link, env)[0])
        theirs.append(opening_ms(baseline, env)[0])
    line("agent-link mcp: spawn to tools/list answered", statistics.median(ours), "ms",
         "minimal MCP-SDK server", statistics.median(theirs), "<= 0.25")
    launcher = ["sh", str(Path(__file__).resolve().parents[1] / "plugins" / "codex" / "agent_link_codex" / "host_plugin"
                          / "hooks" / "agent-link.sh"), "mcp"]
    codex_env = dict(env, AGENT_LINK_HOST="codex", AGENT_LINK_BIN=agent_link[0])
    opening_ms(launcher, codex_env)  # the first start keeps the opening answers for the launcher
    opening_ms(agent_link, codex_env)
    through, direct = [], []
    for _ in range(RUNS):
        through.append(opening_ms(launcher, codex_env)[0])
        direct.append(opening_ms(agent_link, codex_env)[0])
    line("Codex launcher: spawn to tools/list answered", statistics.median(through), "ms",
         "agent-link mcp", statistics.median(direct), "<= 1.0")
    for profile in ("all", "codex", "claude", "messaging"):
        size = opening_ms(agent_link, dict(env, AGENT_LINK_TOOLS=profile))[1]
        print(f"tools/list bytes, AGENT_LINK_TOOLS={profile:<10} {size:9d} bytes")


#: the AGENT_LINK_HOST each host plugin's MCP declaration sets (plugins/*/host_plugin)
HOSTS = ("codex", "claude")


def bench_tools_list(tmp: Path, line) -> None:  # type: ignore[no-untyped-def]
    """The default ``tools/list`` each host receives (``AGENT_LINK_TOOLS`` unset), in bytes,
    against what a plain MCP client gets (every tool); target <= 30,000 bytes per host."""
    env = dict(os.environ, HOME=str(tmp), AGENT_LINK_STATE_DIR=str(tmp / "tools-list-state"),
               XDG_CACHE_HOME=str(tmp / "tools-list-cache"))
    for key in ("AGENT_LINK_TOOLS", "AGENT_LINK_HOST", "AGENT_LINK_LOAD_PLUGINS"):
        env.pop(key, None)
    agent_link = [str(Path(sys.executable).with_name("agent-link")), "mcp"]
    every = opening_ms(agent_link, env)[1]
    for host in HOSTS:
        size = opening_ms(agent_link, dict(env, AGENT_LINK_HOST=host))[1]
        line(f"tools/list bytes, host {host} (default)", size, "bytes", "plain client", every, "<= 30,000 bytes")
