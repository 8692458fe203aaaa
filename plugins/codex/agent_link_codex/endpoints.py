"""Where Codex app-servers can be reached: configured, default, registered.

Candidates, in order of preference for new work (docs/behaviour.md
§16.1, docs/hosts/codex.md §4):

1. ``AGENT_LINK_CODEX_URL`` (a loopback WebSocket; token from ``AGENT_LINK_CODEX_TOKEN_FILE``);
2. ``AGENT_LINK_CODEX_SOCK`` (a Unix socket), then ``AGENT_LINK_CODEX_EXTRA_SOCK``
   (``CODEX_APP_SERVER_SOCKET``: used, never registered);
3. the default control socket ``$CODEX_HOME/app-server-control/app-server-control.sock``
   (``codex app-server daemon`` and ``--listen unix://`` without a path);
4. endpoints the user registered (:class:`EndpointRegistry`);
5. the private app-server agent-link starts itself (:mod:`agent_link_codex.managed`).

Every endpoint has a stable id ``ep_<16 hex>`` derived from its canonical target, so the same
socket keeps its id across runs and whether or not a server is listening.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.store import Store, now_ms

from agent_link_codex.settings import control_socket

#: At most this many registered endpoints, as agent-session-intercom allowed (its capacity
#: leaves room for the default and environment sources); all are probed concurrently.
REGISTRY_CAPACITY = 62
SOURCES = ("env-url", "env-sock", "env-extra", "control-socket", "registered", "managed")
#: ``<endpoint id>:<thread id>``: a thread named together with the app-server that has it (the
#: ``endpointAddress`` of a listed session). Any ``ep_`` id is accepted here so an unknown one
#: gets a clear "no such endpoint" instead of a failed bare-id search.
COMPOSITE_RE = re.compile(r"^(ep_[A-Za-z0-9]{1,64}):([A-Za-z0-9_.-]{1,128})\Z")


@dataclass(frozen=True)
class Endpoint:
    """One app-server address.

    :param id: ``ep_<16 hex>`` from the canonical target.
    :param kind: ``unix`` (WebSocket over a Unix socket) or ``ws`` (loopback WebSocket URL).
    :param target: the canonical socket path or URL.
    :param source: one of :data:`SOURCES`.
    :param token_file: file holding the capability token (``ws`` only).
    :param label: a name the user gave it (registered endpoints).
    """

    id: str
    kind: str
    target: str
    source: str
    token_file: str | None = None
    label: str | None = None

    def view(self) -> dict[str, Any]:
        """A JSON view (never the token itself)."""
        return {"id": self.id, "kind": self.kind, "target": self.target, "source": self.source,
                "label": self.label, "tokenFile": self.token_file}


def canonical_socket(path: str) -> str:
    """The canonical form of a socket path: absolute, normalised, its directory resolved.

    The socket file itself is not resolved: Codex makes it a symlink into
    ``/tmp/codex-daemon-<uid>/`` that exists only while the server runs.
    """
    absolute = os.path.abspath(os.path.expanduser(path))
    parent, name = os.path.split(absolute)
    return os.path.join(os.path.realpath(parent), name)


def canonical_url(url: str) -> str:
    """A WebSocket URL with lower-case scheme and host and a ``/`` path.

    :raises ValueError: not a ``ws://`` URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("ws", "wss") or not parts.hostname:
        raise ValueError(url)
    host = parts.hostname.lower()
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")  # IPv6 keeps its brackets
    return f"{parts.scheme.lower()}://{netloc}{parts.path or '/'}"


def endpoint_id(canonical_target: str) -> str:
    """``ep_`` + the first 16 hex digits of SHA-256 of the canonical target."""
    return "ep_" + hashlib.sha256(canonical_target.encode("utf-8")).hexdigest()[:16]


def parse_composite(value: str) -> tuple[str, str] | None:
    """``(endpoint id, thread id)`` for ``ep_<id>:<thread id>``; None for any other string."""
    m = COMPOSITE_RE.fullmatch(value.strip())
    return (m.group(1), m.group(2)) if m else None


def socket_endpoint(path: str, source: str, label: str | None = None) -> Endpoint:
    """An :class:`Endpoint` for a Unix socket path (canonicalised)."""
    target = canonical_socket(path)
    return Endpoint(endpoint_id(target), "unix", target, source, label=label)


def socket_identity(ep: Endpoint) -> tuple[int, int] | None:
    """The ``(device, inode)`` of the socket a Unix endpoint's path leads to now (through any
    symlinks): two paths with one identity are one app-server. None for a ``ws://`` endpoint
    or a path that leads to no socket now."""
    if ep.kind != "unix":
        return None
    try:
        st = os.stat(ep.target)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None


def url_endpoint(url: str, source: str, token_file: str | None = None, label: str | None = None) -> Endpoint:
    """An :class:`Endpoint` for a WebSocket URL (canonicalised). :raises ValueError: bad URL."""
    target = canonical_url(url)
    return Endpoint(endpoint_id(target), "ws", target, source, token_file=token_file, label=label)


REMOTE_TOKENS_SETTING = "AGENT_LINK_CODEX_REMOTE_TOKENS"


def is_loopback(url: str) -> bool:
    """True when the URL's host is this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_problem(url: str, token_file: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why the token in ``token_file`` must not be sent to ``url``, or None when it may.

    A token goes only to a loopback host, or to a ``wss://`` (TLS) host when
    ``AGENT_LINK_CODEX_REMOTE_TOKENS`` is on; the file must be a regular file of this user
    that no one else can read or write (like an SSH key).
    """
    env = os.environ if env is None else env
    if not is_loopback(url):
        opted_in = (env.get(REMOTE_TOKENS_SETTING) or "").strip().lower() in ("1", "true", "yes", "on")
        if not url.lower().startswith("wss://"):
            return f"{url} is not on this machine and not encrypted (ws://): the token would travel in clear text"
        if not opted_in:
            return f"{url} is not on this machine; sending it a token needs {REMOTE_TOKENS_SETTING}=1"
    try:
        st = os.stat(token_file)
    except OSError as exc:
        return f"the token file {token_file} cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"the token file {token_file} is not a regular file"
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return f"the token file {token_file} can be read or changed by other users (chmod 600 it)"
    return None


class TokenRefused(PermissionError):
    """A token that agent-link will not send (see :func:`token_problem`)."""


def read_token(endpoint: Endpoint) -> str | None:
    """The capability token of a ``ws`` endpoint (stripped), or None without a token file.

    :raises TokenRefused: the token may not go to this endpoint, or its file is not private.
    :raises OSError: the token file cannot be read.
    """
    if not endpoint.token_file:
        return None
    problem = token_problem(endpoint.target, endpoint.token_file)
    if problem is not None:
        raise TokenRefused(problem)
    return Path(endpoint.token_file).read_text(encoding="utf-8").strip()


def configured(values: Mapping[str, Any], env: Mapping[str, str]) -> tuple[list[Endpoint], list[dict[str, Any]]]:
    """The endpoints named by settings plus the default control socket.

    :returns: ``(endpoints, problems)``; a malformed URL is a problem ``{source, target,
        reason:"invalid-url"}``, never an exception.
    """
    found: list[Endpoint] = []
    problems: list[dict[str, Any]] = []
    url = values.get("AGENT_LINK_CODEX_URL")
    if url:
        try:
            found.append(url_endpoint(url, "env-url", values.get("AGENT_LINK_CODEX_TOKEN_FILE")))
        except ValueError:
            problems.append({"source": "env-url", "target": url, "reason": "invalid-url"})
    sock = values.get("AGENT_LINK_CODEX_SOCK")
    if sock:
        found.append(socket_endpoint(sock, "env-sock"))
    extra = values.get("AGENT_LINK_CODEX_EXTRA_SOCK")
    if extra and all(e.id != socket_endpoint(extra, "env-extra").id for e in found):
        found.append(socket_endpoint(extra, "env-extra"))
    control = socket_endpoint(str(control_socket(env)), "control-socket")
    if all(e.id != control.id for e in found):
        found.append(control)
    return found, problems


def explicit(values: Mapping[str, Any]) -> bool:
    """Whether the user named an endpoint (then no private app-server is started)."""
    return bool(values.get("AGENT_LINK_CODEX_URL") or values.get("AGENT_LINK_CODEX_SOCK") or values.get("AGENT_LINK_CODEX_EXTRA_SOCK"))


class EndpointRegistry:
    """The user's registered app-servers, stored in the state database (a 0600 file in a
    0700 directory, so only the user can read or change it).

    :param store: the open agent-link database (with the ``codex`` migrations applied).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def list(self) -> list[Endpoint]:
        """Registered endpoints, oldest first."""
        rows = self.store.conn.execute("SELECT * FROM codex_endpoints ORDER BY added_at, rowid").fetchall()
        return [Endpoint(r["id"], r["kind"], r["target"], "registered", r["token_file"], r["label"]) for r in rows]

    def get(self, key: str) -> Endpoint | None:
        """A registered endpoint by id, socket path or URL; None when not registered."""
        for ep in self.list():
            if key in (ep.id, ep.target) or _canonical_or_none(key) == ep.target:
                return ep
        return None

    @staticmethod
    def prepare(target: str, *, label: str | None = None, token_file: str | None = None) -> Endpoint:
        """The :class:`Endpoint` ``target`` would be registered as, checked but not saved.

        :param target: a socket path (absolute, ``~/...`` or ``unix://...``) or a ``ws://`` URL.
        :raises AgentLinkError: ``invalid_arguments`` for a relative path, a bad URL, a path
            that exists but is not a socket, or a socket owned by another user.
        """
        if "://" in target and not target.startswith("unix://"):
            try:
                ep = url_endpoint(target, "registered", token_file, label)
            except ValueError:
                raise invalid_arguments([{"path": "target", "rule": "format", "expected": "ws://host:port/ URL"}],
                                        "The endpoint URL must look like ws://127.0.0.1:PORT/.") from None
            problem = token_problem(ep.target, token_file) if token_file else None
            if problem is not None:
                raise invalid_arguments(
                    [{"path": "token-file", "rule": "token_safety", "expected": "a private token file for a loopback (or opted-in wss://) URL"}],
                    f"agent-link will not send this token: {problem}.",
                )
            return ep
        path = target.removeprefix("unix://")
        if not (os.path.isabs(path) or path.startswith("~/")):
            raise invalid_arguments([{"path": "target", "rule": "absolute_path", "expected": "an absolute socket path"}],
                                    "The endpoint must be an absolute socket path (or a ws:// URL).")
        _check_socket_owner(path)
        return socket_endpoint(path, "registered", label)

    def add(self, target: str, *, label: str | None = None, token_file: str | None = None) -> Endpoint:
        """Register a socket path (absolute, or ``~/``) or a ``ws://`` URL; idempotent.

        Registering the same canonical target again, or another path to the same socket (a
        symlink to it), updates that endpoint's label and token file and keeps its id.

        :returns: the endpoint as registered (the earlier one for another path to its socket).
        :raises AgentLinkError: ``invalid_arguments`` as :meth:`prepare` says, or for a full
            registry (:data:`REGISTRY_CAPACITY`; rule ``capacity``).
        """
        ep = self.prepare(target, label=label, token_file=token_file)
        same = self.same_socket(ep)
        if same is not None and same.id != ep.id:
            ep = Endpoint(same.id, same.kind, same.target, "registered", ep.token_file, label)
        with self.store.write() as conn:
            existing = conn.execute("SELECT id FROM codex_endpoints WHERE id = ?", (ep.id,)).fetchone()
            if existing is None:
                count = conn.execute("SELECT COUNT(*) FROM codex_endpoints").fetchone()[0]
                if count >= REGISTRY_CAPACITY:
                    raise AgentLinkError(
                        "invalid_arguments", f"At most {REGISTRY_CAPACITY} endpoints can be registered.",
                        {"errors": [{"path": "target", "rule": "capacity", "expected": f"at most {REGISTRY_CAPACITY} endpoints"}]},
                        hint="Remove an endpoint you no longer use first.",
                    )
                conn.execute(
                    "INSERT INTO codex_endpoints (id, kind, target, label, token_file, added_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (ep.id, ep.kind, ep.target, label, ep.token_file, now_ms()),
                )
            else:
                conn.execute("UPDATE codex_endpoints SET label = ?, token_file = ? WHERE id = ?", (label, ep.token_file, ep.id))
        return ep

    def same_socket(self, ep: Endpoint) -> Endpoint | None:
        """The registered endpoint whose path leads to the same socket as ``ep`` now (see
        :func:`socket_identity`); None when there is none or ``ep`` leads to no socket."""
        identity = socket_identity(ep)
        if identity is None:
            return None
        return next((r for r in self.list() if r.id == ep.id or socket_identity(r) == identity), None)

    def remove(self, key: str) -> bool:
        """Forget an endpoint by id, path or URL; True when one was removed."""
        ep = self.get(key)
        if ep is None:
            return False
        with self.store.write() as conn:
            conn.execute("DELETE FROM codex_endpoints WHERE id = ?", (ep.id,))
        return True


def _canonical_or_none(key: str) -> str | None:
    if "://" in key and not key.startswith("unix://"):
        try:
            return canonical_url(key)
        except ValueError:
            return None
    path = key.removeprefix("unix://")
    return canonical_socket(path) if os.path.isabs(os.path.expanduser(path)) else None


def _check_socket_owner(path: str) -> None:
    """A path that exists must be a socket (through Codex's symlink) owned by this user."""
    full = os.path.expanduser(path)
    try:
        st = os.stat(full)
    except FileNotFoundError:
        return  # not running now; registering ahead of time is fine
    except OSError as exc:
        raise invalid_arguments([{"path": "target", "rule": "readable", "expected": f"an accessible socket ({exc.strerror})"}],
                                f"The socket cannot be accessed ({exc.strerror}).") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise invalid_arguments([{"path": "target", "rule": "socket", "expected": "a Unix socket"}], "That path is not a Unix socket.")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise invalid_arguments([{"path": "target", "rule": "owner", "expected": "a socket owned by the current user"}],
                                "That socket belongs to another user; only your own app-servers can be registered.")
