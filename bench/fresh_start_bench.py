"""`make bench`: a fresh state dir starts as fast as a warm one (issue 25).

Spawn of ``agent-link mcp`` to its ``tools/list`` answer, in a state dir that does not exist
yet (no database, no schema: each run a new one) against the same in a state dir used before,
run alternately in the same run with one shared MCP start-up cache (filled by one earlier
start, as on any machine where agent-link ran once); target ratio <= 1.5.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from mcp_start_bench import opening_ms

RUNS = 11


def bench_fresh_start(tmp: Path, line) -> None:  # type: ignore[no-untyped-def]
    """Print the fresh-vs-warm line (``line`` is bench/run.py's printer)."""
    agent_link = [str(Path(sys.executable).with_name("agent-link")), "mcp"]
    base = dict(os.environ, HOME=str(tmp), XDG_CACHE_HOME=str(tmp / "fresh-cache"), XDG_CONFIG_HOME=str(tmp / "fresh-config"))
    warm = dict(base, AGENT_LINK_STATE_DIR=str(tmp / "warm-state"))
    opening_ms(agent_link, warm)  # makes the warm state dir and fills the start-up cache
    fresh_ms, warm_ms = [], []
    for n in range(RUNS):
        fresh_ms.append(opening_ms(agent_link, dict(base, AGENT_LINK_STATE_DIR=str(tmp / f"fresh-state-{n}")))[0])
        warm_ms.append(opening_ms(agent_link, warm)[0])
    line("agent-link mcp on a fresh state dir: to tools/list", statistics.median(fresh_ms), "ms",
         "warm state dir", statistics.median(warm_ms), "<= 1.5")
