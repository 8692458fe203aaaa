"""The private app-server's lifecycle with stand-in programs (no real Codex): binary discovery,
the private directory, start/record/stop, failures remembered for a minute, and the reaper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_link_codex import managed as managed_mod
from agent_link_codex.managed import ManagedError, ManagedServer, Record, check_private_dir, find_codex, pid_alive, reap_orphans

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

# Stands in for `codex app-server --listen unix://PATH`: a WebSocket server on PATH that
# answers initialize (enough for readiness and a first connection).
FAKE_APP_SERVER = textwrap.dedent(
    """
    import asyncio, json, sys
    from websockets.asyncio.server import unix_serve
    path = sys.argv[sys.argv.index("--listen") + 1].removeprefix("unix://")
    async def serve(conn):
        async for raw in conn:
            msg = json.loads(raw)
            if "id" in msg:
                await conn.send(json.dumps({"id": msg["id"], "result": {"userAgent": "fake/0.169.0", "codexHome": "/x"}}))
    async def main():
        async with unix_serve(serve, path):
            await asyncio.Future()
    asyncio.run(main())
    """
)


def program(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path


def server(tmp: Path, **values: object) -> ManagedServer:
    return ManagedServer(tmp / "managed", {"AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS": 5000, **values}, dict(os.environ))


def test_find_codex_order_and_searched_places(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    codex = program(bindir, "codex", "")
    env = {"PATH": str(bindir), "HOME": str(tmp_path)}
    found = find_codex({}, env)
    assert (found.argv, found.source) == ((str(codex), "app-server"), "PATH")
    special = program(tmp_path, "my-server", "")
    assert find_codex({"AGENT_LINK_CODEX_APP_SERVER_BIN": str(special), "AGENT_LINK_CODEX_BIN": "codex"}, env).argv == (str(special),)
    assert find_codex({"AGENT_LINK_CODEX_BIN": "codex"}, env).source == "AGENT_LINK_CODEX_BIN"
    with pytest.raises(ManagedError) as info:
        find_codex({}, {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)})
    assert info.value.reason == "codex-binary-not-found"
    assert "codex" in info.value.searched and f"{tmp_path}/.local/bin/codex" in info.value.searched
    with pytest.raises(ManagedError) as info:
        find_codex({"AGENT_LINK_CODEX_BIN": str(tmp_path / "missing")}, env)
    assert info.value.searched == [str(tmp_path / "missing")]


def test_private_directory_rules(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    check_private_dir(shared)
    assert shared.stat().st_mode & 0o777 == 0o700
    (tmp_path / "alias").symlink_to(shared)
    with pytest.raises(ManagedError) as info:
        check_private_dir(tmp_path / "alias")
    assert info.value.reason == "state-dir-unsafe"


async def test_start_record_stop(short_tmp: Path) -> None:
    fake = program(short_tmp, "fake-app-server", FAKE_APP_SERVER)
    managed = server(short_tmp, AGENT_LINK_CODEX_APP_SERVER_BIN=str(fake))
    (short_tmp / "managed").mkdir(mode=0o700)
    stderr_log = short_tmp / "managed" / f"{os.getpid()}.stderr.log"
    stderr_log.write_text("left by an older version\n")
    stderr_log.chmod(0o644)
    endpoint = await managed.start()
    try:
        rec = managed.record
        assert rec is not None and managed.running and endpoint.source == "managed"
        assert stderr_log.stat().st_mode & 0o777 == 0o600  # the app-server's log is private like every state file
        assert endpoint.target == str(short_tmp / "managed" / f"{os.getpid()}.sock")
        saved = short_tmp / "managed" / f"{rec.pid}.json"
        assert saved.stat().st_mode & 0o777 == 0o600
        data = json.loads(saved.read_text())
        assert (data["ownerPid"], data["pid"], data["pgid"]) == (os.getpid(), rec.pid, rec.pid)
        assert data["command"] == [str(fake), "--listen", f"unix://{endpoint.target}"]
        assert os.getpgid(rec.pid) == rec.pid != os.getpgid(0)  # its own process group
    finally:
        managed.stop()
    assert not pid_alive(rec.pid) and not saved.exists() and not Path(endpoint.target).exists()
    managed.stop()  # idempotent


async def test_failed_start_is_remembered_for_a_minute(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash = program(short_tmp, "crash", "import sys; sys.stderr.write('boom: no config'); sys.exit(3)")
    managed = server(short_tmp, AGENT_LINK_CODEX_APP_SERVER_BIN=str(crash))
    with pytest.raises(ManagedError) as info:
        await managed.start()
    assert info.value.reason == "app-server-exited-during-startup" and "boom: no config" in info.value.detail
    assert list((short_tmp / "managed").glob("*.json")) == []
    with pytest.raises(ManagedError) as cached:
        await managed.start()
    assert cached.value.reason == "startup-failure-cached" and "app-server-exited-during-startup" in cached.value.detail
    clock = time.monotonic() + managed_mod.FAILURE_TTL_S + 1
    monkeypatch.setattr(managed_mod.time, "monotonic", lambda: clock)
    assert ManagedServer.cached_failure(short_tmp / "managed") is None


async def test_readiness_timeout_kills_the_attempt(short_tmp: Path) -> None:
    mute = program(short_tmp, "mute", "import time; time.sleep(60)")
    managed = server(short_tmp, AGENT_LINK_CODEX_APP_SERVER_BIN=str(mute), AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS=600)
    with pytest.raises(ManagedError) as info:
        await managed.start()
    assert info.value.reason == "readiness-timeout"
    assert managed.record is None and list((short_tmp / "managed").glob("*.json")) == []


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_record(directory: Path, owner: int, pid: int, listen: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rec = Record(owner, None, pid, pid, None, "unix", listen, None, None, ["x"], 0)
    path = directory / f"{pid}.json"
    path.write_text(rec.to_json())
    return path


def test_reaper(tmp_path: Path) -> None:
    directory = tmp_path / "managed"
    listen = f"unix://{tmp_path}/orphan.sock"
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "app-server", "--listen", listen],
                              start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_record(directory, dead_pid(), orphan.pid, listen)
        write_record(directory, dead_pid(), stranger.pid, f"unix://{tmp_path}/other.sock")  # pid now someone else's
        kept = write_record(directory, os.getpid(), 999_999, "unix:///live-owner.sock")
        dead = write_record(directory, dead_pid(), dead_pid(), "unix:///gone.sock")
        (directory / "garbage.json").write_text("{not json")
        report = {r["record"]: r["action"] for r in reap_orphans(directory)}
        assert report == {
            f"{orphan.pid}.json": "stopped-orphan", f"{stranger.pid}.json": "removed-pid-reused",
            kept.name: "kept-owner-alive", dead.name: "removed-dead", "garbage.json": "deleted-invalid",
        }
        assert orphan.wait(5) == -signal.SIGTERM
        assert stranger.poll() is None  # pid reuse: never signalled
        assert sorted(p.name for p in directory.glob("*.json")) == [kept.name]
    finally:
        for proc in (orphan, stranger):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
