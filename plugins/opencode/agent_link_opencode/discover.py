"""Finding the running opencode servers of this user, on any port, and their passwords.

``opencode serve`` listens on a port of its choosing (4096 unless told otherwise, ``--port 0``
4096 when free, else a free one); the TUI (opencode 1.18.33) opens a port only when started
with ``--port`` (a config's ``server.port`` is ``opencode serve``'s), so a TUI started without it
cannot be found or reached (``tests/test_opencode_realhost_tui.py``). Every process of this user whose program is opencode's
(:data:`agent_link_opencode.proof.PROGRAM_RE`) and whose ``HOME`` is this process's ``HOME``
(the same user's opencode, not one a test or another account runs with a home of its own) is
asked for its listening TCP sockets (:mod:`psutil`, as :mod:`agent_link_hostkit.procs` does);
each port is one server, named ``http://127.0.0.1:<port>`` (or the address it listens on when
that is not a wildcard or loopback one).

The same process's environment says whether the server wants a password: opencode reads
``OPENCODE_SERVER_PASSWORD`` (and ``OPENCODE_SERVER_USERNAME``, default ``opencode``) from it,
and a process of the same user may read it too, so a server started with a password is read
without the user copying it anywhere. A process whose environment cannot be read is left out
(its ``HOME`` is unknown).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from agent_link_opencode.proof import PROGRAM_RE

#: seconds a scan of the process table is reused (a listing, a look-up and a push in a row scan once)
SCAN_TTL_S = 5.0
_LOOPBACK = ("127.0.0.1", "::1", "0.0.0.0", "::", "")


@dataclass(frozen=True)
class FoundServer:
    """One listening opencode server.

    :param url: its base URL (``http://127.0.0.1:4096``).
    :param pid: the process listening.
    :param username: the basic-auth user it expects (``OPENCODE_SERVER_USERNAME``, default ``opencode``).
    :param password: its ``OPENCODE_SERVER_PASSWORD``, or None when it asks for none.
    """

    url: str
    pid: int
    username: str
    password: str | None


def _url(host: str, port: int) -> str:
    if host in _LOOPBACK:
        return f"http://127.0.0.1:{port}"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def scan(home: str | None = None) -> list[FoundServer]:
    """The opencode servers running now (module docstring), ordered by pid then port.

    :param home: the ``HOME`` a process must have; default this process's.
    :returns: one entry per listening port; empty when psutil cannot list processes.
    """
    import psutil

    home = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    found: list[FoundServer] = []
    try:
        processes = list(psutil.process_iter(["pid", "exe"]))
    except (psutil.Error, OSError):
        return []
    for proc in processes:
        exe = proc.info.get("exe")
        if not exe or not PROGRAM_RE.search(exe):
            continue
        try:
            theirs = proc.environ()  # that process's environment, not this one's
            sockets = proc.net_connections(kind="tcp")
        except (psutil.Error, OSError):
            continue
        if os.path.realpath(theirs.get("HOME") or "/nonexistent") != home:
            continue
        ports: dict[int, str] = {}
        for conn in sockets:
            if conn.status == psutil.CONN_LISTEN and conn.laddr:
                host = str(conn.laddr.ip)
                if conn.laddr.port not in ports or host in _LOOPBACK:
                    ports[conn.laddr.port] = host
        for port in sorted(ports):
            found.append(FoundServer(_url(ports[port], port), proc.pid, theirs.get("OPENCODE_SERVER_USERNAME") or "opencode",
                                     theirs.get("OPENCODE_SERVER_PASSWORD") or None))
    return sorted(found, key=lambda f: (f.pid, f.url))


def credentials(pid: int) -> tuple[str, str] | None:
    """``(username, password)`` from process ``pid``'s ``OPENCODE_SERVER_USERNAME`` (default
    ``opencode``) and ``OPENCODE_SERVER_PASSWORD``; None when it has no password or its
    environment cannot be read."""
    import psutil

    try:
        theirs = psutil.Process(pid).environ()  # that process's environment, not this one's
    except (psutil.Error, OSError):
        return None
    password = theirs.get("OPENCODE_SERVER_PASSWORD") or None
    return (theirs.get("OPENCODE_SERVER_USERNAME") or "opencode", password) if password is not None else None


class Scanner:
    """:func:`scan` for ``home`` (None: this process's), reused for :data:`SCAN_TTL_S` seconds."""

    def __init__(self, home: str | None = None) -> None:
        self.home = home
        self._at = -SCAN_TTL_S
        self._found: list[FoundServer] = []

    def servers(self) -> list[FoundServer]:
        """The servers of the latest scan, scanning again when it is older than the TTL."""
        if time.monotonic() - self._at >= SCAN_TTL_S:
            self._found = scan(self.home)
            self._at = time.monotonic()
        return self._found
