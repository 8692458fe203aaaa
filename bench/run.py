"""agent-link benchmarks (`make bench`). Each line prints a measurement, its baseline
measured in the same run, the ratio, and the target. Targets are not test assertions:
timing on a shared 2-core machine is too noisy to fail a build on.

Runs in a temporary state dir and HOME; never touches the user's.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

from agent_link_testing.dists import install_dist

ROOT = Path(__file__).resolve().parent.parent
CLAUDE_PLUGIN = ROOT / "plugins" / "claude" / "agent_link_claude" / "host_plugin"
HOOK_RUNS = 21


def interleaved_medians(
    a: list[str], b: list[str], env: dict[str, str], stdin_b: str = "", runs: int = HOOK_RUNS
) -> tuple[float, float]:
    """Median wall times (ms) of commands ``a`` and ``b`` run alternately, so that load from
    elsewhere on the machine weighs on both alike. The first pair warms the page cache."""
    times_a: list[float] = []
    times_b: list[float] = []
    for _ in range(runs + 1):
        for cmd, stdin, sink in ((a, "", times_a), (b, stdin_b, times_b)):
            start = time.perf_counter()
            subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=False)
            sink.append((time.perf_counter() - start) * 1000)
    return statistics.median(times_a[1:]), statistics.median(times_b[1:])


def line(name: str, value: float, unit: str, baseline_name: str, baseline: float, target: str) -> None:
    ratio = value / baseline if baseline else float("inf")
    print(f"{name:<44} {value:9.1f} {unit:<6} baseline {baseline_name} {baseline:9.1f} {unit:<6} ratio {ratio:5.2f}  target {target}")


def fill(state: Path, count: int, recipient_prefix: str = "bench:other", body: Callable[[int], str] = lambda i: "body",
         anticipation: str = "reply", search_index: bool = False, to: str | None = None) -> None:
    """Store ``count`` messages from bench:sender to 500 recipients (one transaction per
    1000), or all to ``to`` when given; ``body(i)`` is the i-th body. With ``search_index``
    the database has the search index, whose triggers index each row as it is inserted."""
    os.environ["AGENT_LINK_STATE_DIR"] = str(state)
    from agent_link_core.config import load_config
    from agent_link_core.mailbox import content_hash, new_message_id
    from agent_link_search.schema import SEARCH_MIGRATIONS
    from agent_link_core.store import CORE_MIGRATIONS, Store, now_ms

    store = Store(load_config().db_path, (*CORE_MIGRATIONS, *SEARCH_MIGRATIONS) if search_index else CORE_MIGRATIONS)
    rows = []
    for i in range(count):
        recipient, text = to or f"{recipient_prefix}{i % 500}", body(i)
        rows.append((new_message_id(), "bench:sender", "config", recipient, recipient, text, len(text.encode()),
                     content_hash("bench:sender", recipient, text, anticipation, None, None), "{}", now_ms(), anticipation, None, None))
        if len(rows) == 1000 or i == count - 1:
            with store.write() as conn:
                conn.executemany(
                    "INSERT INTO messages (id, from_addr, from_source, to_addr, recipient, body, body_bytes, content_hash,"
                    " metadata, sent_at, anticipation, reply_by, reply_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            rows = []
    store.close()


#: the hook benches' cases: (label, messages stored for other sessions, unread ones for this session)
HOOK_CASES = (("no mail", 0, 0), ("10,000 for others", 10_000, 0), ("10,000 for others + 3 unread", 10_000, 3))


def hook_state(tmp: Path, name: str, others: int, mine: int, address: str) -> Path:
    """A state dir for one hook case: ``others`` messages to other sessions, ``mine`` unread for
    ``address``; checked, so that a bench never measures a database other than the one it names."""
    state = tmp / name
    state.mkdir(parents=True, exist_ok=True)  # a used installation: the state dir exists even with no mail
    if others:
        fill(state, others)
    if mine:
        fill(state, mine, to=address)
    if others or mine:
        import sqlite3

        conn = sqlite3.connect(state / "agent-link.db")
        stored, for_it = conn.execute("SELECT COUNT(*), SUM(recipient = ?) FROM messages", (address,)).fetchone()
        conn.close()
        if (stored, for_it) != (others + mine, mine):
            raise SystemExit(f"hook bench: {state} holds {stored} messages, {for_it} for {address}; expected {others + mine}, {mine}")
    return state


def measure_hook(label: str, command: list[str], env: dict[str, str], payload: str, mine: int) -> None:
    """Run the hook once (it builds the prompt-hook registry), check that it answers as the case
    expects (a note exactly when there is mail for it), then time it against ``node -e 0``."""
    first = subprocess.run(command, input=payload, env=env, capture_output=True, text=True, check=False)
    if bool(first.stdout.strip()) != bool(mine):
        raise SystemExit(f"hook bench ({label}): expected {'a note' if mine else 'no output'}, got {first.stdout!r} {first.stderr!r}")
    node_ms, hook_ms = interleaved_medians([shutil.which("node") or "node", "-e", "0"], command, env, payload)
    line(label, hook_ms, "ms", "node -e 0", node_ms, "<= 0.47")


def compile_sources() -> None:
    """Installed packages have bytecode; editable sources may not (PYTHONDONTWRITEBYTECODE)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "agent_link_core"), str(ROOT / "plugins")],
                   check=False, capture_output=True)


def bench_hook(tmp: Path) -> None:
    """A plugin's prompt hook through ``agent-link hook`` (the adapter asks for the pending note)."""
    compile_sources()
    exe = str(Path(sys.executable).with_name("agent-link"))
    # a plugin installed as pip would, with its adapter registered through the plugin system
    install_dist(tmp / "site", "agent_link_benchhost", {
        "plugin.py": "from agent_link_core import hookimpl\n"
                     "from agent_link_core.records import PromptHook\n"
                     "@hookimpl\n"
                     "def agent_link_register_prompt_hooks(register):\n"
                     "    register(PromptHook('bench-host', 'agent_link_benchhost.hook'))\n",
        "hook.py": "def handle(event, payload, ctx):\n"
                   "    note = ctx.pending_note(payload.get('address', ''))\n"
                   "    return {'context': note} if note else None\n",
    }, entry_name="bench-host", entry_module="agent_link_benchhost.plugin")
    for n, (label, others, mine) in enumerate(HOOK_CASES):
        state = hook_state(tmp, f"hook-{n}", others, mine, "bench:me")
        env = dict(os.environ, HOME=str(tmp), AGENT_LINK_STATE_DIR=str(state), PYTHONPATH=str(tmp / "site"))
        measure_hook(f"hook ({label})", [exe, "hook", "bench-host", "Prompt"], env, json.dumps({"address": "bench:me"}), mine)


def bench_claude_hook(tmp: Path) -> None:
    """The Claude UserPromptSubmit hook exactly as the plugin's hooks/hooks.json declares it (through the
    sh launcher), in each of :data:`HOOK_CASES`."""
    compile_sources()
    declared = json.loads((CLAUDE_PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    session_id = "0f3c1d7e-0000-4000-8000-000000000001"
    payload = json.dumps({"session_id": session_id, "hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": str(tmp)})
    for n, (label, others, mine) in enumerate(HOOK_CASES):
        state = hook_state(tmp, f"claude-hook-{n}", others, mine, f"claude:{session_id}")
        env = dict(os.environ, HOME=str(tmp), AGENT_LINK_STATE_DIR=str(state), CLAUDE_PLUGIN_ROOT=str(CLAUDE_PLUGIN),
                   AGENT_LINK_BIN=str(Path(sys.executable).with_name("agent-link")), CLAUDE_CONFIG_DIR=str(tmp / ".claude"))
        measure_hook(f"claude hook ({label})", ["sh", "-c", declared], env, payload, mine)


def bench_reads(tmp: Path) -> None:
    results = {}
    for count in (100, 100_000):
        state = tmp / f"reads-{count}"
        fill(state, count - 20)
        os.environ["AGENT_LINK_STATE_DIR"] = str(state)
        from agent_link_core.app import App
        from agent_link_core.model import Caller

        app = App.create()
        me = Caller("bench:me", "config", "bench")
        sender = Caller("bench:sender", "config", "bench")
        import asyncio

        ids = [asyncio.run(app.send(caller=sender, to="bench:me", body=f"m{i}", anticipation="reply")).message["id"] for i in range(20)]
        reps = 200
        start = time.perf_counter()
        for _ in range(reps):
            app.inbox(me, limit=20, mark=False)
        inbox_ms = (time.perf_counter() - start) * 1000 / reps
        start = time.perf_counter()
        for _ in range(reps):
            app.status(sender, ids[_ % 20])
        status_ms = (time.perf_counter() - start) * 1000 / reps
        results[count] = (inbox_ms, status_ms)
        app.close()
    line("read inbox (100,000 stored)", results[100_000][0], "ms", "100 stored", results[100][0], "<= 1.5")
    line("message status (100,000 stored)", results[100_000][1], "ms", "100 stored", results[100][1], "<= 1.5")


def _send_many(args: tuple[str, int, int]) -> None:
    state, worker, count = args
    os.environ["AGENT_LINK_STATE_DIR"] = state
    from agent_link_core.config import load_config
    from agent_link_core.mailbox import Mailbox, new_message_id
    from agent_link_core.records import OutgoingMessage
    from agent_link_core.model import Caller
    from agent_link_core.store import Store

    config = load_config()
    box = Mailbox(Store(config.db_path), config)
    me = Caller(f"bench:w{worker}", "config", "bench")
    for i in range(count):
        box.store_message(OutgoingMessage(new_message_id(), me, "bench:sink", "bench:sink", f"#{i}", "fyi", None, None))


def throughput(state: Path, workers: int, per_worker: int) -> float:
    from agent_link_core.store import Store

    Store(state / "agent-link.db").close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_send_many, args=((str(state), w, per_worker),)) for w in range(workers)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return workers * per_worker / (time.perf_counter() - start)


def bench_concurrent_sends(tmp: Path) -> None:
    single = throughput(tmp / "send-1", 1, 4000)
    many = throughput(tmp / "send-8", 8, 1000)
    line("8 processes sending at once", many, "msg/s", "1 process", single, ">= 2000 msg/s total")
    print(f"{'':<44} {many:9.1f} msg/s against the 2,000 msg/s target: ratio {many / 2000:5.2f}")


SEARCH_WORDS = [f"w{i:04d}" for i in range(3000)]


def _body(rng: Any, i: int) -> str:
    """About 30 words from a 3,000-word vocabulary; every 100th message also says "needle"."""
    words = rng.choices(SEARCH_WORDS, k=30)
    if i % 100 == 0:
        words[rng.randrange(30)] = "needle"
    return " ".join(words)


def _search_db(state: Path, count: int) -> None:
    """``count`` messages between bench:sender and 500 recipients, in a database with the
    search index."""
    import random

    rng = random.Random(7)
    fill(state, count, body=lambda i: _body(rng, i), anticipation="fyi", search_index=True)


def bench_visible(tmp: Path) -> None:
    """The one rule for tool-result text (agent_link_core/visible.py) on a list_agents-sized
    result (100 sessions, about 40 KB, non-ASCII titles, one title with invisible characters),
    against serialising that result as JSON, which every tool result is anyway."""
    import json

    from agent_link_core.visible import visible_data

    sessions = [{"address": f"codex:01a22a93-0000-7000-8000-{i:012d}", "harness": "codex", "id": f"01a22a93-0000-7000-8000-{i:012d}",
                 "title": ("Réparer le parseur des titres " * 3) + ("\u202e\u200b" if i == 0 else ""), "cwd": "/work/project/alpha",
                 "surface": ["cli"], "loaded": True, "archived": False, "lastActivityAt": "2026-11-30T04:00:00Z",
                 "receive": {"push": "codex-turn", "nudge": "codex-hook", "pull": True}} for i in range(100)]
    result = {"ok": True, "sessions": sessions}
    reps = 300
    start = time.perf_counter()
    for _ in range(reps):
        visible_data(result)
    visible_ms = (time.perf_counter() - start) * 1000 / reps
    start = time.perf_counter()
    for _ in range(reps):
        json.dumps(result, ensure_ascii=False)
    json_ms = (time.perf_counter() - start) * 1000 / reps
    line("visible text of a 100-session result", visible_ms, "ms", "json.dumps", json_ms, "<= 5")


def bench_search(tmp: Path) -> None:
    """A page of search results (20, newest first) with 100,000 stored messages against the
    same search with 1,000; as the sender of every message, so visibility keeps them all."""
    from agent_link_core.app import App
    from agent_link_core.model import Caller
    from agent_link_search.index import search_messages

    results = {}
    me = Caller("bench:sender", "config", "bench")
    for count in (1_000, 100_000):
        state = tmp / f"search-{count}"
        _search_db(state, count)
        app = App.create()
        for query in ("needle", "w0042 OR needle", "bench:other7"):
            search_messages(app, me, query)  # warm the page cache
        reps = 100
        start = time.perf_counter()
        for i in range(reps):
            search_messages(app, me, ("needle", "w0042 OR needle", "bench:other7")[i % 3], limit=20)
        results[count] = (time.perf_counter() - start) * 1000 / reps
        app.close()
    line("search, one page (100,000 stored)", results[100_000], "ms", "1,000 stored", results[1_000], "<= 3")


def _insert_rate(path: Path, with_index: bool, count: int, start_at: int) -> float:
    """Messages per second stored one transaction each, as senders store them."""
    import random

    from agent_link_core.config import load_config
    from agent_link_core.mailbox import Mailbox, new_message_id
    from agent_link_core.records import OutgoingMessage
    from agent_link_core.model import Caller
    from agent_link_search.schema import SEARCH_MIGRATIONS
    from agent_link_core.store import CORE_MIGRATIONS, Store

    rng = random.Random(start_at)
    store = Store(path, (*CORE_MIGRATIONS, *SEARCH_MIGRATIONS) if with_index else CORE_MIGRATIONS)
    box = Mailbox(store, load_config())
    me = Caller("bench:sender", "config", "bench")
    messages = [OutgoingMessage(new_message_id(), me, "bench:sink", "bench:sink", _body(rng, start_at + i), "fyi", None, None)
                for i in range(count)]
    start = time.perf_counter()
    for msg in messages:
        box.store_message(msg)
    rate = count / (time.perf_counter() - start)
    store.close()
    return rate


def bench_insert_with_index(tmp: Path) -> None:
    """Insert rate with the search index against without it, alternating rounds so that load
    from elsewhere weighs on both alike."""
    with_index, without = [], []
    for round_no in range(6):
        without.append(_insert_rate(tmp / "insert-plain.db", False, 2000, round_no * 2000))
        with_index.append(_insert_rate(tmp / "insert-fts.db", True, 2000, round_no * 2000))
    line("insert rate with the search index", statistics.median(with_index), "msg/s", "no index",
         statistics.median(without), ">= 0.8")


def bench_boundary(tmp: Path) -> None:
    """One hook call with one plugin implementation through the boundary's guard (inline,
    timed, bounded; what a read pays per plugin of the envelope hook, issue 32) against the
    same implementation called through a bare pluggy manager, alternating rounds."""
    import pluggy

    from agent_link_core import hookimpl, hookspecs
    from agent_link_core.lazy import PROJECT
    from agent_link_core.app import App

    class Plugin:
        @hookimpl
        def agent_link_render_envelopes(self, messages: Any) -> None:
            return None

    os.environ["AGENT_LINK_STATE_DIR"] = str(tmp / "boundary")
    os.environ["AGENT_LINK_LOAD_PLUGINS"] = ""
    app = App.create(extra_plugins=(("bench", Plugin()),))
    bare = pluggy.PluginManager(PROJECT)
    bare.add_hookspecs(hookspecs)
    bare.register(Plugin())
    message = {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "metadata": {}}
    guarded, plain, n = [], [], 5000
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            app.hooks.call("agent_link_render_envelopes", messages=[message])
        guarded.append((time.perf_counter() - start) * 1e6 / n)
        start = time.perf_counter()
        for _ in range(n):
            bare.hook.agent_link_render_envelopes(messages=[message], app=app)
        plain.append((time.perf_counter() - start) * 1e6 / n)
    app.close()
    line("hook call through the boundary (1 impl)", statistics.median(guarded), "us", "bare pluggy",
         statistics.median(plain), "<= 10")


#: Sections in the order `make bench` runs them; `bench/run.py NAME ...` runs only those named.
SECTIONS: dict[str, Callable[[Path], None]] = {
    "mcp_start": lambda tmp: __import__("mcp_start_bench").bench_mcp_start(tmp, line),  # bench/mcp_start_bench.py
    "tools_list": lambda tmp: __import__("mcp_start_bench").bench_tools_list(tmp, line),  # bytes per host
    "cli_cpu": lambda tmp: __import__("cli_cpu_bench").bench_cli_cpu(tmp, fill, line),  # bench/cli_cpu_bench.py
    "hook": bench_hook,
    "claude_hook": bench_claude_hook,
    "reads": bench_reads,
    "boundary": bench_boundary,
    "sends": bench_concurrent_sends,
    "search": bench_search,
    "visible": bench_visible,
    "insert": bench_insert_with_index,
    "codex": lambda tmp: __import__("codex_bench").bench_codex(tmp),  # Codex delivery vs a bare turn/start
    "opencode": lambda tmp: __import__("opencode_bench").bench_opencode(tmp),  # opencode delivery vs a bare prompt_async
    "projects": lambda tmp: __import__("projects_bench").bench_projects(),  # the obligation classifier
    "readpath": lambda tmp: __import__("readpath_bench").bench_readpath(tmp, line),  # MCP reads by size, send/read p50
    "fresh_start": lambda tmp: __import__("fresh_start_bench").bench_fresh_start(tmp, line),  # fresh vs warm state dir
    "waits": lambda tmp: __import__("waits_bench").bench_waits(tmp, line),  # bench/waits_bench.py: reply -> waiter wakes
    "leases": lambda tmp: __import__("leases_bench").bench_leases(tmp, line),  # a lease conflict check, 10,000 vs 10 leases
    "leases_hook": lambda tmp: __import__("leases_bench").bench_leases_hook(tmp, line, interleaved_medians),  # the edit guard
    "machines": lambda tmp: __import__("machines_bench").bench_machines(tmp, line),  # bench/machines_bench.py: two machines, one engine
}


def main(argv: list[str]) -> None:
    unknown = [name for name in argv if name not in SECTIONS]
    if unknown:
        sys.exit(f"bench: unknown section {', '.join(unknown)}; sections: {', '.join(SECTIONS)}")
    # The loop guard stays on (its look-ups are part of every send measured) but lets the
    # benchmarks' bursts through: most exchange many messages between one pair in seconds.
    os.environ.setdefault("AGENT_LINK_PAIR_RATE", "10000")
    with tempfile.TemporaryDirectory(prefix="agent-link-bench-") as name:
        tmp = Path(name)
        os.environ["HOME"] = str(tmp)
        for section, run in SECTIONS.items():
            if not argv or section in argv:
                run(tmp)


if __name__ == "__main__":
    main(sys.argv[1:])
