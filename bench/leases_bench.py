"""File lease benchmark, called by bench/run.py (`make bench`, section ``leases``).

A conflict check (:func:`agent_link_leases.table.conflicts`, what every claim runs) against
10,000 active leases, against the same check with 10 leases, measured alternately in the same
run. The leases are other holders' files spread over 100 directories of one project, with a
few globs; the claim is a new file in one of those directories. Target: <= 1.5x.

The ``PreToolUse`` edit guard as Claude Code runs it (``agent-link hook leases PreToolUse``,
an Edit of a file nobody holds) with 1,000 active leases, against ``node -e 0``, alternated,
with bytecode compiled as an installed package has it. Target: <= 0.47x. Its path loads
neither the mailbox nor ``shlex`` (edit tools), the same modules as the prompt hook: what is
left is the interpreter's start, ``json``, ``re`` and ``sqlite3``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROUNDS = 21
CALLS = 200


def _store(path: Path, count: int, root_path: str | None = None) -> object:
    from agent_link_core.store import CORE_MIGRATIONS, Store, now_ms
    from agent_link_leases.table import MIGRATIONS, Project, claim

    store = Store(path, (*CORE_MIGRATIONS, *MIGRATIONS))
    root = Project(root_path or str(path.parent / "project"), False)
    now = now_ms()
    for i in range(count):
        pattern = f"src/m{i % 100}/*.txt" if i % 500 == 0 else f"src/m{i % 100}/f{i}.py"
        claim(store, f"bench:h{i % 50}", root, [pattern], exclusive=True, reason="bench", ttl_ms=3_600_000, now=now)
    return store


def _per_check_us(store: object, root_path: str) -> float:
    from agent_link_core.store import now_ms
    from agent_link_leases.patterns import parse
    from agent_link_leases.table import Project, conflicts

    root = Project(root_path, False)
    wanted = [("src/m7/new.py", parse("src/m7/new.py"))]
    conn = store.conn  # type: ignore[attr-defined]
    now = now_ms()
    start = time.perf_counter()
    for _ in range(CALLS):
        conflicts(conn, "bench:me", root, wanted, True, now)
    return (time.perf_counter() - start) / CALLS * 1e6


def bench_leases(tmp: Path, line: Callable[..., None]) -> None:
    (tmp / "leases-big").mkdir()
    (tmp / "leases-small").mkdir()
    big = _store(tmp / "leases-big" / "state.db", 10_000)
    small = _store(tmp / "leases-small" / "state.db", 10)
    big_times, small_times = [], []
    for _ in range(ROUNDS):
        small_times.append(_per_check_us(small, str(tmp / "leases-small" / "project")))
        big_times.append(_per_check_us(big, str(tmp / "leases-big" / "project")))
    line("lease conflict check, 10,000 leases", statistics.median(big_times), "us", "10 leases",
         statistics.median(small_times), "<= 1.5")


def bench_leases_hook(tmp: Path, line: Callable[..., None], medians: Callable[..., tuple[float, float]]) -> None:
    state = tmp / "leases-hook"
    state.mkdir()
    project = tmp / "leases-hook-project"
    (project / ".git").mkdir(parents=True)
    _store(state / "agent-link.db", 1000, str(project)).close()  # type: ignore[attr-defined]
    payload = json.dumps({"session_id": "0f3c1d7e-0000-4000-8000-000000000001", "hook_event_name": "PreToolUse",
                          "tool_name": "Edit", "cwd": str(project),
                          "tool_input": {"file_path": "src/m7/new.py", "old_string": "a", "new_string": "b"}})
    # Installed packages have bytecode; editable sources may not (PYTHONDONTWRITEBYTECODE).
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "agent_link_core"), str(root / "plugins")],
                   check=False, capture_output=True)
    env = dict(os.environ, HOME=str(tmp), AGENT_LINK_STATE_DIR=str(state))
    hook = [str(Path(sys.executable).with_name("agent-link")), "hook", "leases", "PreToolUse"]
    subprocess.run(hook, input="{}", env=env, capture_output=True, text=True, check=False)  # builds the prompt-hook registry
    node_ms, hook_ms = medians([shutil.which("node") or "node", "-e", "0"], hook, env, payload)
    line("PreToolUse lease guard, 1,000 leases", hook_ms, "ms", "node -e 0", node_ms, "<= 0.47")
    # Codex and Claude Code run the guard before every shell command, reads included: a
    # read-only pipeline with a glob and a variable goes through the whole shell reading
    shell = json.dumps({**json.loads(payload), "tool_name": "Bash",
                        "tool_input": {"command": "cd src && OUT=/dev/null; grep -rn todo m7/*.py | sort > $OUT; git status"}})
    node_ms, hook_ms = medians([shutil.which("node") or "node", "-e", "0"], hook, env, shell)
    line("PreToolUse lease guard, a shell command, 1,000 leases", hook_ms, "ms", "node -e 0", node_ms, "<= 0.47")
