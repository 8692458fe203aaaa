"""The REAL opencode TUI (pinned, stub Messages API, in a pseudo-terminal) and agent-link's discovery.

Observed with opencode 1.18.33: the TUI alone (``opencode``) serves its sessions to no one (it
opens no TCP port; a config's ``server.port`` does not change that either, it is ``opencode
serve``'s); started with ``--port`` it listens like ``opencode serve`` (``--port 0``: 4096 when
free, else a free port). So agent-link finds a TUI's sessions when the TUI was started with
``--port``: this test starts one so, with a ``HOME`` of its own, and an agent-link with that
``HOME`` and no server configured lists a session made there, found from the TUI's process.
The port is a free one, never ``0``: on 4096 the TUI would show up in every listing of tests
running beside it (the harness's default server), as it once did in a Codex test's.

If the program is missing this test fails with "run `make hosts`" -- it never skips.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_opencode.discover import scan
from agent_link_testing.host_process import free_port
from agent_link_testing.messages_stub import MessagesStub
from agent_link_testing.opencode_host import opencode_binary, opencode_config

pytestmark = [pytest.mark.realhost, pytest.mark.anyio, pytest.mark.timeout(240)]

START_TIMEOUT_S = 90.0
QUIET = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
         "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}


def start_tui(root: Path, base_url: str, *args: str) -> subprocess.Popen[bytes]:
    """``opencode [args]`` in a pseudo-terminal, with a HOME and XDG folders under ``root``; its
    screen output is read and dropped (a full terminal would stall it)."""
    home, work = root / "home", root / "work"
    xdg = {f"XDG_{n.upper()}_HOME": root / "xdg" / n for n in ("config", "data", "cache", "state")}
    for folder in (home, work, *xdg.values()):
        folder.mkdir(parents=True, exist_ok=True)
    config = root / "opencode.json"
    config.write_text(json.dumps(opencode_config(base_url)))
    env = {"PATH": os.environ["PATH"], "TERM": "xterm-256color", "HOME": str(home), "OPENCODE_CONFIG": str(config),
           "HTTP_PROXY": base_url, "HTTPS_PROXY": base_url, "NO_PROXY": "127.0.0.1,localhost",
           **QUIET, **{k: str(v) for k, v in xdg.items()}}
    leader, follower = pty.openpty()
    process = subprocess.Popen([str(opencode_binary()), *args], cwd=work, env=env, stdin=follower, stdout=follower,
                               stderr=follower, start_new_session=True)
    os.close(follower)

    def drain() -> None:
        try:
            while os.read(leader, 65536):
                pass
        except OSError:
            pass
        finally:
            os.close(leader)

    threading.Thread(target=drain, daemon=True).start()
    return process


def healthy(url: str) -> bool:
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/global/health", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


async def test_opencode_tui_started_with_a_port_is_found_and_its_sessions_listed(tmp_path: Path) -> None:
    with MessagesStub(default_text="ok") as stub:
        tui = start_tui(tmp_path / "tui", stub.base_url, "--port", str(free_port()))
        try:
            home = str(tmp_path / "tui" / "home")
            deadline = time.monotonic() + START_TIMEOUT_S
            while not (found := [s for s in scan(home) if s.pid == tui.pid]):
                assert tui.poll() is None, f"the TUI exited ({tui.returncode})"
                assert time.monotonic() < deadline, "the TUI opened no port"
                time.sleep(0.5)
            url = found[0].url
            while not healthy(url):  # listening comes before ready, as with opencode serve
                assert time.monotonic() < deadline, "the TUI's server never became ready"
                time.sleep(0.5)
            request = urllib.request.Request(url + "/session", data=b'{"title": "in the TUI"}', method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=60) as answer:
                session = json.loads(answer.read())
            app = App.create(env={"HOME": home, "AGENT_LINK_STATE_DIR": str(tmp_path / "state"),
                                  "AGENT_LINK_LOAD_PLUGINS": "opencode", "AGENT_LINK_OPENCODE_SERVERS": "http://127.0.0.1:9"})
            try:  # the TUI may be busy a while after the session was made (answers slower than a read waits)
                listing = await app.harnesses["opencode"].list_sessions()
                while session["id"] not in {s.id for s in listing.sessions}:
                    assert time.monotonic() < deadline + START_TIMEOUT_S, listing.provider
                    time.sleep(1.0)
                    listing = await app.harnesses["opencode"].list_sessions()
            finally:
                await app.aclose()
            assert any(s["url"] == url and s.get("discovered") for s in listing.provider["servers"]), listing.provider
        finally:
            stop(tui)
