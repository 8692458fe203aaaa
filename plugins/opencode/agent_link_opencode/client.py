"""HTTP calls to an opencode server (``opencode serve``'s API: docs/hosts/opencode.md), shared by
the listing (:mod:`agent_link_opencode.harness`) and the push (:mod:`agent_link_opencode.delivery`).
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

#: seconds one HTTP call to a server may take (the core bounds a whole listing at 20 s)
REQUEST_TIMEOUT_S = 5.0
#: the basic-auth user opencode's server expects with OPENCODE_SERVER_PASSWORD
SERVER_USER = "opencode"


def auth_header(auth: str | tuple[str, str] | None) -> str | None:
    """The basic-auth ``Authorization`` header value for ``auth``: a password (user
    ``opencode``) or ``(username, password)``; None for None."""
    if auth is None:
        return None
    user, password = (SERVER_USER, auth) if isinstance(auth, str) else auth
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class ServerError(Exception):
    """One server could not be read; ``reason`` is the provider report's code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def parse_servers(raw: str | None) -> tuple[list[str], list[str]]:
    """Split ``AGENT_LINK_OPENCODE_SERVERS`` into base URLs.

    :param raw: comma-separated ``http(s)://host:port`` URLs (a trailing ``/`` is dropped).
    :returns: ``(urls, bad)``: the usable URLs in order without repeats, and the entries that
        are not an http(s) URL with a host.
    """
    urls: list[str] = []
    bad: list[str] = []
    for entry in (raw or "").split(","):
        entry = entry.strip().rstrip("/")
        if not entry:
            continue
        parts = urlsplit(entry)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
            bad.append(entry)
        elif entry not in urls:
            urls.append(entry)
    return urls, bad


def call_api(base_url: str, method: str, path: str, body: Any, password: str | tuple[str, str] | None,
             timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    """``method base_url + path`` without any proxy, the answer decoded as JSON.

    :param body: a JSON-able request body, or None for none.
    :param password: basic auth when not None: the password (user ``opencode``) or
        ``(username, password)``.
    :param timeout_s: socket timeout in seconds.
    :returns: the decoded answer; None for an empty one (``204``).
    :raises ServerError: ``unauthorized`` (HTTP 401), ``http_error`` (other non-2xx),
        ``unreachable`` (connection refused, timeout) or ``bad_answer`` (not JSON).
    """
    import urllib.error  # the HTTP client (and the email package it pulls in) only when a listing asks
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base_url + path, data=data, method=method, headers={"Accept": "application/json"})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    header = auth_header(password)
    if header is not None:
        request.add_header("Authorization", header)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as answer:
            raw = answer.read()
    except urllib.error.HTTPError as exc:
        raise ServerError("unauthorized" if exc.code == 401 else "http_error", f"{method} {path}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise ServerError("unreachable", f"{method} {path}: {exc}") from None
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise ServerError("bad_answer", f"{method} {path}: not JSON") from None


def fetch_json(base_url: str, path: str, password: str | tuple[str, str] | None, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    """``GET base_url + path`` (:func:`call_api`); an empty answer is ``bad_answer``.

    :raises ServerError: as :func:`call_api`.
    """
    answer = call_api(base_url, "GET", path, None, password, timeout_s)
    if answer is None:
        raise ServerError("bad_answer", f"GET {path}: empty")
    return answer


def read_server(base_url: str, password: str | tuple[str, str] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One server's sessions and their status (blocking; run it in a thread).

    :returns: ``(sessions, statuses)``: the ``GET /session`` entries and the
        ``GET /session/status`` map (session id -> ``{"type": "busy" | ...}``).
    :raises ServerError: as :func:`fetch_json`, or ``bad_answer`` when the shapes are not a
        list and an object.
    """
    sessions = fetch_json(base_url, "/session", password)
    statuses = fetch_json(base_url, "/session/status", password)
    if not isinstance(sessions, list) or not isinstance(statuses, dict):
        raise ServerError("bad_answer", "GET /session is not a list or GET /session/status not an object")
    return [s for s in sessions if isinstance(s, dict)], statuses
