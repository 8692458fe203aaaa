"""Fixtures for the claude plugin's tests: builders for fake Claude Code / Claude Desktop state
in the test's temporary HOME (the root conftest points HOME and CLAUDE_CONFIG_DIR there).

The shapes follow what Claude Code 2.1.197 writes (docs/hosts/claude-code.md §3-4,
checked against real runs in test_claude_realhost.py) and the Desktop sidecar fields of
docs/behaviour.md §15.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import agent_link_claude
from agent_link_claude.procs import proc_start
from agent_link_testing.claude_host import ClaudeHost, agent_link_bin, stage_plugin

REPO = Path(agent_link_claude.__file__).resolve().parents[3]
PLUGIN = "agent-link@agent-link"
SERVER_RULE = "mcp__plugin_agent-link_codex-agent-link"


class FakeClaude:
    """Writes the files Claude Code and Claude Desktop keep (all static methods)."""

    @staticmethod
    def config_dir() -> Path:
        return Path(os.environ["CLAUDE_CONFIG_DIR"])


    @staticmethod
    def project_dir_name(cwd: str) -> str:
        return re.sub(r"[^a-zA-Z0-9]", "-", cwd)


    @staticmethod
    def write_transcript(
        session_id: str,
        cwd: str = "/home/user/proj",
        *,
        prompt: str = "fix the parser",
        title: str | None = None,
        ai_title: str | None = None,
        padding: int = 0,
        mtime: float | None = None,
    ) -> Path:
        """A transcript like a finished ``claude -p`` run: queue lines, the user prompt with a
        system reminder first, an assistant answer, then (optionally) ``padding`` bytes of
        conversation and the re-appended title lines at the end."""
        path = FakeClaude.config_dir() / "projects" / FakeClaude.project_dir_name(cwd) / f"{session_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        ts = "2026-01-02T03:04:05.678Z"
        lines: list[dict[str, Any]] = [
            {"type": "queue-operation", "operation": "enqueue", "timestamp": ts, "sessionId": session_id, "content": prompt},
            {"type": "user", "sessionId": session_id, "cwd": cwd, "timestamp": ts, "entrypoint": "sdk-cli", "uuid": "u1",
             "message": {"role": "user", "content": [
                 {"type": "text", "text": "<system-reminder>\nctx\n</system-reminder>"}, {"type": "text", "text": prompt}]}},
            {"type": "assistant", "sessionId": session_id, "timestamp": ts,
             "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}},
        ]
        if padding:
            lines.append({"type": "assistant", "sessionId": session_id, "message": {"role": "assistant", "content": "x" * padding}})
        if title:
            lines.append({"type": "custom-title", "customTitle": title, "sessionId": session_id})
        if ai_title:
            lines.append({"type": "ai-title", "aiTitle": ai_title, "sessionId": session_id})
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path


    @staticmethod
    def write_live(pid: int, session_id: str, cwd: str = "/home/user/proj", *, proc: str | None = "auto", name: str = "proj-1a") -> Path:
        """A ``sessions/<pid>.json`` file; ``proc="auto"`` records the pid's real start stamp."""
        path = FakeClaude.config_dir() / "sessions" / f"{pid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {
            "pid": pid, "sessionId": session_id, "cwd": cwd, "startedAt": 1767323045678, "version": "2.1.197",
            "peerProtocol": 1, "kind": "interactive", "entrypoint": "cli", "name": name, "nameSource": "derived",
            "status": "idle", "updatedAt": 1767323046000,
        }
        if proc is not None:
            data["procStart"] = proc_start(pid) if proc == "auto" else proc
        path.write_text(json.dumps(data))
        return path


    @staticmethod
    def write_sidecar(
        root: Path, sidecar_id: str, *, surface_dir: str = "claude-code-sessions", cli: str | None = None,
        prior: tuple[str, ...] = (), title: str | None = "Desktop task", archived: bool = False, cwd: str = "/home/user/desk",
        last_activity: int = 1767323999000,
    ) -> Path:
        """A Claude Desktop sidecar ``<root>/<surface dir>/<account>/<org>/local_<id>.json``."""
        path = root / surface_dir / "acct" / "org" / f"local_{sidecar_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"sessionId": f"local_{sidecar_id}", "cwd": cwd, "isArchived": archived,
                                "createdAt": 1767320000000, "lastActivityAt": last_activity, "model": "claude-x"}
        if cli:
            data["cliSessionId"] = cli
        if prior:
            data["priorCliSessionIds"] = list(prior)
        if title:
            data["title"] = title
        path.write_text(json.dumps(data))
        return path


    @staticmethod
    def linux_desktop_root() -> Path:
        return Path(os.environ["HOME"]) / ".config" / "Claude"


    @staticmethod
    def mac_desktop_root() -> Path:
        return Path(os.environ["HOME"]) / "Library" / "Application Support" / "Claude"


@pytest.fixture(autouse=True)
def only_the_claude_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests exercise the claude plugin with the core alone: the other plugins are
    disabled (in this process and, through the environment, in every agent-link process a
    test starts), so their state cannot change what is asserted here."""
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex roles receipts")


@pytest.fixture
def fake_claude() -> type[FakeClaude]:
    return FakeClaude


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- agent-link installed into the real Claude Code (real-host tests) --------------------------


@dataclass(frozen=True)
class InstalledPlugin:
    """A Claude Code HOME with agent-link installed from a directory marketplace.

    :param home: the HOME (``<home>/.claude`` is the config dir) every test host reuses.
    :param root: the marketplace folder it was installed from, which Claude Code runs the
        plugin from (``CLAUDE_PLUGIN_ROOT``).
    :param env: what claude processes need to run it (``AGENT_LINK_BIN`` for a staged copy).
    :param install_s: how long ``marketplace add`` + ``install`` took.
    """

    home: Path
    root: Path
    env: Mapping[str, str] = field(default_factory=dict)
    install_s: float = 0.0

    def host(self, *, stub: Any = None, env: Mapping[str, str | None] | None = None, **kw: Any) -> ClaudeHost:
        """A :class:`ClaudeHost` on this HOME (``env`` adds to :attr:`env`)."""
        return ClaudeHost.create(self.home, stub=stub, env={**self.env, **(env or {})}, **kw)


def _install(home: Path, marketplace: Path, env: Mapping[str, str]) -> InstalledPlugin:
    host = ClaudeHost.create(home, env=env)
    start = time.monotonic()
    host.install_plugin(marketplace, PLUGIN)
    took = time.monotonic() - start
    listed = host.run_cli("plugin", "list")
    assert PLUGIN in listed.stdout, listed.stdout + listed.stderr
    host.allow_tools(SERVER_RULE)
    return InstalledPlugin(home, marketplace, dict(env), took)


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> InstalledPlugin:
    """agent-link installed from a lean staging copy of the plugin's files (a few KB instead
    of the ~1 GB checkout that Claude Code would copy into its plugin cache); the launcher
    runs the venv's agent-link through ``AGENT_LINK_BIN``."""
    staged = stage_plugin(tmp_path_factory.mktemp("agent-link-plugin"))
    return _install(tmp_path_factory.mktemp("claude-home"), staged, {"AGENT_LINK_BIN": str(agent_link_bin())})


@pytest.fixture(scope="session")
def installed_from_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledPlugin]:
    """agent-link installed from this repository's marketplace (``claude plugin marketplace add
    <checkout>``): Claude Code copies only the small plugin folder it names, whose launcher runs
    the ``agent-link`` on PATH (the test venv's bin, as after ``pipx install``)."""
    path = f"{agent_link_bin().parent}{os.pathsep}{os.environ.get('PATH', '')}"
    yield _install(tmp_path_factory.mktemp("claude-home-repo"), REPO, {"PATH": path})
