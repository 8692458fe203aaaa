"""The relay started by the MCP servers of a machine (``agent_link_server_tasks``).

With ``AGENT_LINK_ENGINE_URL`` set and ``AGENT_LINK_MACHINES_AUTOSTART`` on (the default),
every ``agent-link mcp`` server of a state dir runs :func:`keep_relay`: every
:data:`CHECK_S` seconds it looks whether a relay holds ``<state>/machines/relay.lock``
(``flock``, :func:`agent_link_machines.relay.take_lock`) and, when none does, starts
``agent-link machines run --if-none`` as its own child, logging to
``<state>/machines/relay.log``. The lock keeps it to one relay per state dir: of two servers
that start one at the same moment, the second relay finds the lock taken and exits 0 at once.

The relay lives as long as the server that started it (it is stopped with SIGTERM when the
server stops); another server of the state dir then starts one within :data:`CHECK_S`. A
relay that exits with an error (wrong credentials, a name taken: its one line is in
``relay.log``) is not started again before :data:`FAILED_BACKOFF_S`, so a wrong setting does
not spawn a process every few seconds; one stopped by a signal is started again at the next
check.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import subprocess
import sys
from typing import Any

from agent_link_machines.common import plugin_dir

log = logging.getLogger(__name__)
CHECK_S = 5.0
FAILED_BACKOFF_S = 300.0
STOP_S = 10.0


def relay_running(config: Any) -> bool:
    """True when a process holds ``<state>/machines/relay.lock`` (a relay of this state dir runs)."""
    path = plugin_dir(config) / "relay.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # never made: no relay ever ran here
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the lock this check may have taken
    return False


def start_relay(config: Any) -> subprocess.Popen[bytes]:
    """Start ``agent-link machines run --if-none`` for this state dir as a child of this process,
    its output appended to ``<state>/machines/relay.log``.

    :raises OSError: the log or the process cannot be made.
    """
    folder = plugin_dir(config)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder / "relay.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        # the running interpreter's own CLI: the same installation as this server
        return subprocess.Popen([sys.executable, "-m", "agent_link_core", "machines", "run", "--if-none"],
                                stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=dict(os.environ, AGENT_LINK_STATE_DIR=config.state_dir))
    finally:
        os.close(fd)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after :data:`STOP_S` seconds. Blocking: it runs as the server
    stops, where a cancelled task cannot await any more."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def keep_relay(app: Any) -> None:
    """Keep one relay running for ``app``'s state dir while this server runs (module docstring)."""
    proc: subprocess.Popen[bytes] | None = None
    try:
        while True:
            if proc is not None and proc.poll() is not None:
                code, proc = proc.returncode, None
                if code > 0:  # its own error exit (one line in relay.log); a signal (< 0) is not one
                    log.warning("the relay exited %s (see %s); not started again for %.0f s",
                                code, plugin_dir(app.config) / "relay.log", FAILED_BACKOFF_S)
                    await asyncio.sleep(FAILED_BACKOFF_S)
                    continue
            if proc is None and not await asyncio.to_thread(relay_running, app.config):
                proc = await asyncio.to_thread(start_relay, app.config)
            await asyncio.sleep(CHECK_S)
    finally:
        if proc is not None:
            stop(proc)
