"""Read-only access to Codex rollout transcripts, for when no app-server can be had.

Layout on Codex 0.169.0 (docs/hosts/codex.md §8):

* ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`` (active) and
  ``$CODEX_HOME/archived_sessions/<same file name>`` (archived, flat);
* every line ``{timestamp, ordinal, type, payload}``; line 1 is ``session_meta`` (id, cwd,
  source, originator, cli_version, model_provider; forks add ``forked_from_id`` and
  ``history_base {thread_id, end_ordinal_exclusive, end_byte_offset}``);
* ``event_msg`` payloads ``task_started`` / ``task_complete`` / ``turn_aborted`` (turn
  lifecycle) and ``item_completed`` with ``UserMessage {id, client_id, content}`` and
  ``AgentMessage {id, content}`` items;
* ``$CODEX_HOME/session_index.jsonl`` lines ``{id, thread_name, updated_at}`` give names.

A fork's file does not repeat its parent's lines: its history continues the parent's up to
``history_base.end_ordinal_exclusive``. Rollouts may be large, so summaries read a bounded
head and tail window; only a clientId check scans a whole file (as bytes, line by line).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

THREAD_FILE_RE = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$")
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
MAX_WINDOW_BYTES = 4 * 1024 * 1024
PREVIEW_CHARS = 500
ENVELOPE_BODY_CHARS = 200  # of an envelope's body, kept in a preview after the envelope's header
ACTIVE_EVENTS = frozenset({"task_started", "turn_started"})
IDLE_EVENTS = frozenset({"task_complete", "turn_aborted", "task_completed", "turn_complete", "turn_completed"})
FORK_DEPTH_MAX = 16


def rollout_files(home: Path, scope: str = "active") -> list[Path]:
    """Rollout files newest first (by mtime); ``scope`` is active, archived or all."""
    roots = {"active": ["sessions"], "archived": ["archived_sessions"], "all": ["sessions", "archived_sessions"]}[scope]
    found: list[tuple[float, Path]] = []
    for root in roots:
        base = home / root
        if not base.is_dir():
            continue
        for path in base.rglob("*.jsonl"):
            if THREAD_FILE_RE.search(path.name):
                try:
                    found.append((path.stat().st_mtime, path))
                except OSError:
                    continue
    found.sort(key=lambda t: -t[0])
    return [p for _, p in found]


def find_rollout(home: Path, thread_id: str) -> Path | None:
    """The rollout of ``thread_id`` (active before archived), confirmed by its first line."""
    if not re.fullmatch(r"[0-9A-Za-z-]{1,64}", thread_id):
        return None
    candidates = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"), reverse=True)
    candidates += sorted((home / "archived_sessions").glob(f"rollout-*-{thread_id}.jsonl"), reverse=True)
    candidates += list((home / "sessions").glob(f"**/{thread_id}.jsonl"))
    for path in candidates:
        meta = session_meta(path)
        if meta is not None and meta.get("id") == thread_id:
            return path
    return None


def is_archived(home: Path, path: Path) -> bool:
    """Whether ``path`` lies in ``archived_sessions``."""
    try:
        path.resolve().relative_to((home / "archived_sessions").resolve())
        return True
    except ValueError:
        return False


def _lines_from(path: Path, start: int, size: int) -> list[dict[str, Any]]:
    """Parsed JSON lines in the byte window ``[start, start+size)``; partial lines dropped."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(size)
    except OSError:
        return []
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]
    if start + size < _size(path):
        lines = lines[:-1]
    out = []
    for raw in lines:
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def session_meta(path: Path) -> dict[str, Any] | None:
    """The ``session_meta`` payload (first line), or None."""
    for rec in _lines_from(path, 0, HEAD_BYTES)[:1]:
        if rec.get("type") == "session_meta" and isinstance(rec.get("payload"), dict):
            return rec["payload"]
    return None


def _item(rec: dict[str, Any]) -> dict[str, Any] | None:
    """A user or agent message item from an ``item_completed`` line, in app-server shape."""
    payload = rec.get("payload")
    if rec.get("type") != "event_msg" or not isinstance(payload, dict) or payload.get("type") != "item_completed":
        return None
    item = payload.get("item")
    if not isinstance(item, dict):
        return None
    texts = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
    text = "".join(t for t in texts if isinstance(t, str))
    if item.get("type") == "UserMessage":
        return {"type": "userMessage", "id": item.get("id"), "clientId": item.get("client_id"), "text": text,
                "turnId": payload.get("turn_id"), "ordinal": rec.get("ordinal")}
    if item.get("type") == "AgentMessage":
        return {"type": "agentMessage", "id": item.get("id"), "text": text, "turnId": payload.get("turn_id"),
                "ordinal": rec.get("ordinal")}
    return None


def thread_names(home: Path) -> dict[str, str]:
    """``{thread id: name}`` from ``session_index.jsonl`` (the last entry per id wins)."""
    names: dict[str, str] = {}
    try:
        with open(home / "session_index.jsonl", "rb") as fh:
            for raw in fh:
                try:
                    rec = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("id"), str) and isinstance(rec.get("thread_name"), str):
                    names[rec["id"]] = rec["thread_name"]
    except OSError:
        pass
    return names


def preview_limit(text: str) -> int:
    """How much of a first user message a preview keeps: ``PREVIEW_CHARS``, or for an
    agent-link envelope (a thread agent-link started) enough to reach the body's first words,
    which name the thread (:func:`agent_link_hostkit.titles.envelope_title`)."""
    body = text.find("<body>") if text.lstrip().startswith("<agent-link-message") else -1
    return max(PREVIEW_CHARS, body + len("<body>") + ENVELOPE_BODY_CHARS) if body >= 0 else PREVIEW_CHARS


def summary(home: Path, path: Path, names: dict[str, str] | None = None) -> dict[str, Any] | None:
    """A thread-like summary of one rollout (``localOnly: true``), or None if unreadable.

    Status comes from the last turn lifecycle event: ``active`` after a start with no end,
    ``idle`` after an end, ``unknown`` without either (``status.source: "local-jsonl"``).
    """
    meta = session_meta(path)
    if meta is None or not isinstance(meta.get("id"), str):
        return None
    preview = None
    window = HEAD_BYTES
    while preview is None and window <= MAX_WINDOW_BYTES:
        for rec in _lines_from(path, 0, window):
            item = _item(rec)
            if item is not None and item["type"] == "userMessage":
                preview = item["text"]
                break
        if window >= _size(path):
            break
        window *= 4
    last_event = None
    last_agent = None
    window = TAIL_BYTES
    size = _size(path)
    while True:
        for rec in reversed(_lines_from(path, max(0, size - window), window)):
            payload = rec.get("payload") if isinstance(rec.get("payload"), dict) else {}
            kind = payload.get("type")
            if last_event is None and rec.get("type") == "event_msg" and kind in ACTIVE_EVENTS | IDLE_EVENTS:
                last_event = kind
            if last_agent is None:
                item = _item(rec)
                if item is not None and item["type"] == "agentMessage":
                    last_agent = item["text"]
            if last_event is not None and last_agent is not None:
                break
        if (last_event is not None and last_agent is not None) or window >= size or window >= MAX_WINDOW_BYTES:
            break
        window *= 4
    status = "active" if last_event in ACTIVE_EVENTS else "idle" if last_event in IDLE_EVENTS else "unknown"
    try:
        mtime = int(path.stat().st_mtime)
    except OSError:
        mtime = None
    tid = meta["id"]
    if preview is not None and len(preview) > preview_limit(preview):
        preview = preview[: preview_limit(preview) - 1] + "…"
    return {
        "id": tid,
        "name": (names if names is not None else thread_names(home)).get(tid),
        "preview": preview,
        "cwd": meta.get("cwd"),
        "createdAt": _epoch_s(meta.get("timestamp")),
        "updatedAt": mtime,
        "status": {"type": status, "source": "local-jsonl", "lastLifecycleEvent": last_event},
        "path": str(path),
        "archived": is_archived(home, path),
        "source": _kind(meta.get("source")),
        "originator": meta.get("originator"),
        "cliVersion": meta.get("cli_version"),
        "modelProvider": meta.get("model_provider"),
        "forkedFromId": meta.get("forked_from_id"),
        "lastAgentMessage": last_agent,
        "localOnly": True,
    }


def _kind(source: Any) -> str:
    """``vscode`` / ``exec`` / ..., or the variant name of an object source (``subAgent``)."""
    if isinstance(source, str):
        return source
    if isinstance(source, dict) and source:
        return str(next(iter(source)))
    return "unknown"


def _epoch_s(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def client_id_seen(path: Path, client_id: str) -> dict[str, Any] | None:
    """The userMessage item whose ``client_id`` is ``client_id`` (delivery evidence), or None.

    Scans the whole file as bytes; only lines containing the id are parsed.
    """
    needle = client_id.encode()
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if needle not in raw:
                    continue
                try:
                    item = _item(json.loads(raw))
                except (ValueError, RecursionError):
                    continue
                if item is not None and item["type"] == "userMessage" and item.get("clientId") == client_id:
                    return item
    except OSError:
        return None
    return None


def _own_items(path: Path, below_ordinal: int | None = None) -> Iterator[dict[str, Any]]:
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if b"item_completed" not in raw:
                    continue
                try:
                    rec = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if below_ordinal is not None and isinstance(rec.get("ordinal"), int) and rec["ordinal"] >= below_ordinal:
                    break
                item = _item(rec)
                if item is not None:
                    yield item
    except OSError:
        return


def history_items(home: Path, path: Path, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` user/agent message items of a thread, oldest first.

    A fork's history starts with its parent's items before
    ``history_base.end_ordinal_exclusive`` (recursively, up to 16 forks deep).
    """
    chain: list[tuple[Path, int | None]] = []
    current: Path | None = path
    cutoff: int | None = None
    while current is not None and len(chain) < FORK_DEPTH_MAX:
        chain.append((current, cutoff))
        meta = session_meta(current) or {}
        base = meta.get("history_base")
        if not isinstance(base, dict) or not isinstance(base.get("thread_id"), str):
            break
        cutoff = base.get("end_ordinal_exclusive") if isinstance(base.get("end_ordinal_exclusive"), int) else None
        current = find_rollout(home, base["thread_id"])
    items: list[dict[str, Any]] = []
    for rollout, below in reversed(chain):
        items.extend(_own_items(rollout, below))
    return items[-limit:] if limit else []


def rollout_holders(path: str, exclude: set[int], *, method: str = "auto") -> list[int] | None:
    """Processes other than ``exclude`` that have ``path`` open (another app-server running a
    turn in the thread, the Codex desktop app...).

    ``method`` ``psutil`` asks psutil for each process's open files (Linux, macOS, Windows);
    ``lsof`` runs ``lsof -F p -- <path>`` (``/usr/sbin/lsof`` on macOS when present, 5 s
    bound); ``auto`` uses psutil and falls back to lsof when psutil cannot see a single
    process's files (e.g. a platform psutil does not cover).

    :returns: their pids (sorted), or None when this cannot be checked here (neither way works).
    """
    if method in ("auto", "psutil"):
        found = _holders_psutil(path, exclude)
        if found is not None or method == "psutil":
            return found
    return _holders_lsof(path, exclude)


def _holders_psutil(path: str, exclude: set[int]) -> list[int] | None:
    import psutil

    try:
        psutil.Process().open_files()  # can psutil read open files on this platform at all?
    except (psutil.Error, OSError, NotImplementedError):
        return None
    target = os.path.realpath(path)
    holders: list[int] = []
    for proc in psutil.process_iter():
        if proc.pid in exclude:
            continue
        try:
            files = proc.open_files()
        except (psutil.Error, OSError, NotImplementedError):
            continue  # gone meanwhile, or another user's process
        if any(os.path.realpath(f.path) == target for f in files):
            holders.append(proc.pid)
    return sorted(holders)


LSOF_PATHS = ("/usr/sbin/lsof", "lsof")
LSOF_TIMEOUT_S = 5.0


def _holders_lsof(path: str, exclude: set[int]) -> list[int] | None:
    import shutil
    import subprocess

    program = next((p for p in (shutil.which(c) for c in LSOF_PATHS) if p), None)
    if program is None:
        return None
    try:
        done = subprocess.run([program, "-F", "p", "--", path], capture_output=True, text=True, timeout=LSOF_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1) or (done.returncode == 1 and done.stdout.strip()):
        return None
    pids = {int(line[1:]) for line in done.stdout.splitlines() if line.startswith("p") and line[1:].isdigit()}
    return sorted(pids - exclude)


def token_counts(path: Path) -> list[dict[str, Any]]:
    """Every ``token_count`` record of a rollout, oldest first, named as the app-server's
    ``thread/tokenUsage/updated`` names them: ``{turnId, total, last, modelContextWindow}``
    with ``total``/``last`` = ``{inputTokens, cachedInputTokens, outputTokens,
    reasoningOutputTokens, totalTokens}``. ``turnId`` is the turn whose ``task_started`` came
    last before the record. Only the file's own lines: a fork's counts start at its fork point.
    Reads the file line by line, parsing only the lifecycle and token lines; [] when unreadable.
    """
    out: list[dict[str, Any]] = []
    turn: str | None = None
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if b'"token_count"' not in raw and b'"task_started"' not in raw:
                    continue
                try:
                    payload = json.loads(raw).get("payload") or {}
                except ValueError:
                    continue
                if payload.get("type") == "task_started":
                    turn = payload.get("turn_id") if isinstance(payload.get("turn_id"), str) else turn
                elif payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
                    info = payload["info"]
                    out.append({"turnId": turn, "total": _usage(info.get("total_token_usage")),
                                "last": _usage(info.get("last_token_usage")),
                                "modelContextWindow": info.get("model_context_window")})
    except OSError:
        return []
    return out


def _usage(raw: Any) -> dict[str, int]:
    """A rollout token usage (snake_case) in the app-server's camelCase names."""
    raw = raw if isinstance(raw, dict) else {}
    names = {"input_tokens": "inputTokens", "cached_input_tokens": "cachedInputTokens", "output_tokens": "outputTokens",
             "reasoning_output_tokens": "reasoningOutputTokens", "total_tokens": "totalTokens"}
    return {camel: int(raw.get(snake) or 0) for snake, camel in names.items()}
