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

Without an MCP server (the CLI alone), a process that wrote the outbox starts a relay itself
(:func:`nudge_relay`, from the plugin's ``agent_link_on_event``): detached, it stops once it
has been idle for :data:`NUDGED_IDLE_S`, replies to what it sent included if they come in time.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import subprocess
import sys
import time
from typing import Any

from agent_link_machines.common import plugin_dir

log = logging.getLogger(__name__)
CHECK_S = 5.0
#: how long a relay started by a send from the CLI (:func:`nudge_relay`) stays idle before it stops, s
NUDGED_IDLE_S = 120
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


def start_relay(config: Any, *extra: str, detached: bool = False) -> subprocess.Popen[bytes]:
    """Start ``agent-link machines run --if-none EXTRA`` for this state dir, its output
    appended to ``<state>/machines/relay.log``: a child of this process, or with ``detached``
    one in a session of its own that outlives it.

    :raises OSError: the log or the process cannot be made.
    """
    folder = plugin_dir(config)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder / "relay.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        # the running interpreter's own CLI: the same installation as this server
        return subprocess.Popen([sys.executable, "-m", "agent_link_core", "machines", "run", "--if-none", *extra],
                                stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=dict(os.environ, AGENT_LINK_STATE_DIR=config.state_dir),
                                start_new_session=detached)
    finally:
        os.close(fd)


def nudge_relay(config: Any) -> bool:
    """After this process wrote the outbox (a CLI send, a reply): when no relay of the state
    dir runs, start one detached that stops once idle for :data:`NUDGED_IDLE_S` (its outbox
    sent, nothing arriving), so mail goes out with no MCP server running. At most one start
    per :data:`CHECK_S` (a relay that fails at once is not started on every send).

    :returns: True when a relay was started.
    """
    if relay_running(config):
        return False
    mark = plugin_dir(config) / "nudged"
    try:
        if time.time() - mark.stat().st_mtime < CHECK_S:
            return False
    except OSError:
        pass  # never nudged
    try:
        mark.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        mark.touch(mode=0o600)
        start_relay(config, "--until-idle", str(NUDGED_IDLE_S), detached=True)
    except OSError as exc:  # the send stands; health says no relay runs
        log.warning("agent-link: cannot start the relay: %s", exc)
        return False
    return True


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
                    log.warning("agent-link: the relay exited %s (see %s); not started again for %.0f s",
                                code, plugin_dir(app.config) / "relay.log", FAILED_BACKOFF_S)
                    await asyncio.sleep(FAILED_BACKOFF_S)
                    continue
            if proc is None and not await asyncio.to_thread(relay_running, app.config):
                proc = await asyncio.to_thread(start_relay, app.config)
            await asyncio.sleep(CHECK_S)
    finally:
        if proc is not None:
            stop(proc)
