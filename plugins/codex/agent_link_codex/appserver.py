"""JSON-RPC client for the Codex CLI app-server (``codex app-server --listen …``).

Wire format (Codex app-server protocol, verified on Codex CLI 0.169.0; see
docs/hosts/codex.md §4–§5):

- one JSON message per WebSocket text frame, over a Unix socket (HTTP Upgrade on the stream,
  any host in the URI) or a loopback TCP WebSocket (capability token as ``Authorization:
  Bearer``);
- JSON-RPC 2.0-like, **without** a ``jsonrpc`` field: requests ``{id, method, params}``,
  responses ``{id, result}`` / ``{id, error:{code, message, data?}}``, notifications
  ``{method, params}`` (often with a top-level ``emittedAtMs``), server→client requests carry
  both ``id`` and ``method``. This client sends no ``jsonrpc`` field either (the server accepts
  both) and uses string ids ``agent-link-<n>``;
- ``initialize {clientInfo:{name, title?, version}, capabilities?:{experimentalApi,
  optOutNotificationMethods?}}`` must come first (otherwise ``-32600 "Not initialized"``),
  followed by the notification ``initialized``;
- almost every application error is ``-32600`` with a descriptive message.

One reader task per connection routes responses to a dict of pending futures by id,
dispatches notifications to subscribers and answers (or leaves) server→client requests. When
the connection ends every pending request fails with :class:`ConnectionLost`. All timeouts are
in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any


from agent_link_codex.rpc import (
    AppServerError,
    AppServerException,
    AppServerUnavailable,
    ConnectionLost,
    Notification,
    NotificationCallback,
    ServerRequest,
    ServerRequestHandler,
    Subscription,
    _Filter,
    refusal_for,
)

__all__ = [
    "DEFAULT_MAX_SIZE",
    "DEFAULT_OPEN_TIMEOUT_MS",
    "DEFAULT_REQUEST_TIMEOUT_MS",
    "AppServerClient",
    "AppServerError",
    "AppServerException",
    "AppServerUnavailable",
    "ConnectionLost",
    "Notification",
    "ServerRequest",
    "Subscription",
    "refusal_for",
]

if TYPE_CHECKING:  # websockets loads with the first connection, not with the harness
    from websockets.asyncio.client import ClientConnection

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT_MS = 30_000
DEFAULT_OPEN_TIMEOUT_MS = 10_000
#: Largest incoming message accepted (64 MiB; the server advertises 16 MiB unfragmented frames,
#: and ``thread/read`` with ``includeTurns`` on a long thread can exceed websockets' 1 MiB default).
DEFAULT_MAX_SIZE = 64 * 1024 * 1024
_COUNTED_METHODS_MAX = 64
_RECENT_MAX = 20


# the client --------------------------------------------------------------------------------------
class AppServerClient:
    """A connection to one Codex app-server. Create it with :meth:`connect_unix` or :meth:`connect_ws`.

    Usage::

        client = await AppServerClient.connect_unix(path, refuse_server_requests=True)
        try:
            await client.initialize("codex-agent-link", "0.1.0", title="Codex Agent Link")
            result = await client.request("thread/start", {"cwd": "/project"})
        finally:
            await client.close()

    (``async with await AppServerClient.connect_unix(path) as client:`` closes it too.)

    asyncio only, one event loop, not thread-safe. Requests may run concurrently; each has its
    own timeout, and every pending one fails with :class:`ConnectionLost` when the connection
    ends (the client never reconnects by itself: make a new one).

    :param refuse_server_requests: answer every server→client request with a refusal (see
        :func:`refusal_for`); otherwise they go to ``on_server_request`` when given (its return
        value is the result; an :class:`AppServerError` it raises becomes the error reply) or
        are left unanswered and counted in :attr:`server_request_counts`.
    :param default_timeout_ms: per-request timeout when :meth:`request` gets none (30000).
    """

    def __init__(
        self,
        ws: ClientConnection,
        endpoint: str,
        *,
        refuse_server_requests: bool = False,
        on_server_request: ServerRequestHandler | None = None,
        default_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        id_prefix: str = "agent-link-",
    ) -> None:
        """Wrap an open websockets connection; prefer the ``connect_*`` class methods."""
        self._ws = ws
        self.endpoint = endpoint
        self.refuse_server_requests = refuse_server_requests
        self.on_server_request = on_server_request
        self.default_timeout_ms = default_timeout_ms
        self._id_prefix = id_prefix
        self._ids = itertools.count(1)
        self._pending: dict[str | int, tuple[str, asyncio.Future[Any]]] = {}
        self._callbacks: dict[int, tuple[_Filter, NotificationCallback]] = {}
        self._callback_ids = itertools.count(1)
        self._subscriptions: set[Subscription] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed_reason: str | None = None
        self._closed_detail = ""
        self._closed = asyncio.Event()
        #: Notifications received per method (at most 64 distinct methods are counted).
        self.notification_counts: dict[str, int] = {}
        #: The last 20 notifications received.
        self.recent_notifications: deque[Notification] = deque(maxlen=_RECENT_MAX)
        #: Server→client requests received per method, and how many were left unanswered.
        self.server_request_counts: dict[str, int] = {}
        self.unanswered_server_requests = 0
        #: Responses that arrived after their request timed out (or with an unknown id).
        self.late_responses = 0
        #: The ``initialize`` result once :meth:`initialize` succeeded.
        self.server_info: dict[str, Any] | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read_loop(), name=f"appserver-reader {endpoint}")

    # connecting --------------------------------------------------------------------------------
    @classmethod
    async def connect_unix(
        cls,
        path: str | os.PathLike[str],
        *,
        open_timeout_ms: int = DEFAULT_OPEN_TIMEOUT_MS,
        max_size: int = DEFAULT_MAX_SIZE,
        **options: Any,
    ) -> AppServerClient:
        """Open a WebSocket over the Unix socket at ``path`` (client URI ``ws://localhost/``).

        Connects through ``os.path.realpath(path)``: Codex makes ``path`` a symlink to the real
        socket under ``/tmp/codex-daemon-<uid>/``, and a symlink path longer than the AF_UNIX
        limit (~107 bytes) cannot be connected to directly.

        :param open_timeout_ms: bound on connect plus handshake.
        :param max_size: largest incoming message in bytes (default 64 MiB).
        :param options: passed to the constructor (``refuse_server_requests``, ...).
        :raises AppServerUnavailable: ``open-failed`` (missing/refused socket, handshake
            error) or ``open-timeout``.
        """
        from websockets.asyncio.client import unix_connect
        from websockets.exceptions import InvalidHandshake, InvalidURI

        endpoint = f"unix://{os.fspath(path)}"
        real = os.path.realpath(os.fspath(path))
        try:
            ws = await unix_connect(
                real,
                uri="ws://localhost/",
                open_timeout=open_timeout_ms / 1000,
                max_size=max_size,
                compression=None,
                close_timeout=2,
            )
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise AppServerUnavailable("open-timeout", endpoint, f"no handshake within {open_timeout_ms} ms") from exc
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise AppServerUnavailable("open-failed", endpoint, _describe(exc)) from exc
        return cls(ws, endpoint, **options)

    @classmethod
    async def connect_ws(
        cls,
        url: str,
        token: str | None = None,
        *,
        open_timeout_ms: int = DEFAULT_OPEN_TIMEOUT_MS,
        max_size: int = DEFAULT_MAX_SIZE,
        **options: Any,
    ) -> AppServerClient:
        """Open a WebSocket to ``url`` (``ws://127.0.0.1:<port>/``; no proxy is used).

        :param token: capability token sent as ``Authorization: Bearer <token>`` (Codex
            ``--ws-auth capability-token``); never logged or put in errors.
        :raises AppServerUnavailable: ``open-failed`` (refused, bad URL, HTTP 401 for a wrong
            token, ...) or ``open-timeout``.
        """
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidURI

        headers = {"Authorization": f"Bearer {token}"} if token else None
        try:
            ws = await connect(
                url,
                additional_headers=headers,
                open_timeout=open_timeout_ms / 1000,
                max_size=max_size,
                compression=None,
                close_timeout=2,
                proxy=None,
            )
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise AppServerUnavailable("open-timeout", url, f"no handshake within {open_timeout_ms} ms") from exc
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise AppServerUnavailable("open-failed", url, _describe(exc)) from exc
        return cls(ws, url, **options)

    # state -------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether the connection has ended (for any reason)."""
        return self._closed_reason is not None

    @property
    def closed_reason(self) -> str | None:
        """``connection-lost`` or ``client-closed`` once closed, else None."""
        return self._closed_reason

    @property
    def peer_pid(self) -> int | None:
        """The server's process id over a Unix socket (``SO_PEERCRED``, Linux), else None.

        Tells agent-link's own app-servers apart from other processes holding a thread's
        rollout file open.
        """
        sock = self._ws.transport.get_extra_info("socket") if self._ws.transport is not None else None
        cred = getattr(socket, "SO_PEERCRED", None)
        if sock is None or cred is None or sock.family != socket.AF_UNIX:
            return None
        try:
            pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, cred, struct.calcsize("3i")))
        except OSError:
            return None
        return pid or None

    @property
    def pending_count(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    async def wait_closed(self, timeout_ms: int | None = None) -> None:
        """Wait until the connection has ended. :raises TimeoutError: not within ``timeout_ms``."""
        async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
            await self._closed.wait()

    def _lost_error(self, detail: str = "", method: str | None = None) -> ConnectionLost:
        reason = self._closed_reason or "connection-lost"
        text = detail or self._closed_detail
        return ConnectionLost(reason, self.endpoint, text, method)

    # requests ----------------------------------------------------------------------------------
    async def initialize(
        self,
        client_name: str,
        version: str,
        *,
        title: str | None = None,
        experimental_api: bool = True,
        opt_out_notification_methods: Collection[str] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[str, Any]:
        """Send ``initialize`` then the ``initialized`` notification; returns the result.

        Params sent: ``{clientInfo:{name, version, title?}, capabilities:{experimentalApi,
        optOutNotificationMethods?}}``. The result (0.169.0) is ``{userAgent, codexHome,
        platformFamily, platformOs}``. Note the first client to initialize an app-server
        process fixes its originator (``clientInfo.name``) for every thread it creates.

        :raises AppServerError: e.g. ``-32600 "Already initialized"``.
        :raises AppServerUnavailable: transport failure or timeout.
        """
        client_info: dict[str, Any] = {"name": client_name, "version": version}
        if title is not None:
            client_info["title"] = title
        capabilities: dict[str, Any] = {"experimentalApi": experimental_api}
        if opt_out_notification_methods:
            capabilities["optOutNotificationMethods"] = list(opt_out_notification_methods)
        result = await self.request(
            "initialize", {"clientInfo": client_info, "capabilities": capabilities}, timeout_ms=timeout_ms
        )
        await self.notify("initialized")
        self.server_info = result if isinstance(result, dict) else {}
        return self.server_info

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, timeout_ms: int | None = None
    ) -> Any:
        """Send request ``method`` and return its ``result``.

        :param params: the ``params`` object (omitted from the message when None).
        :param timeout_ms: how long to wait for the answer (default :attr:`default_timeout_ms`).
        :raises AppServerError: the server answered with an error (``code``, ``message``).
        :raises AppServerUnavailable: ``request-timeout`` (the request is forgotten; a late
            answer is dropped and counted in :attr:`late_responses`) or ``send-failed``.
        :raises ConnectionLost: the connection ended before the answer or was already closed.
        :raises TypeError: ``params`` is not JSON-serialisable.
        """
        if self.closed:
            raise self._lost_error(method=method)
        request_id = f"{self._id_prefix}{next(self._ids)}"
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        payload = json.dumps(message)  # a TypeError here is the caller's bug, not a transport failure
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        timeout = self.default_timeout_ms if timeout_ms is None else timeout_ms
        try:
            await self._write(payload, method)
            try:
                async with asyncio.timeout(timeout / 1000):
                    return await asyncio.shield(future)
            except TimeoutError as exc:
                if future.done():  # resolved in the same tick as the deadline
                    return future.result()
                raise AppServerUnavailable(
                    "request-timeout", self.endpoint, f"no answer within {timeout} ms", method
                ) from exc
        finally:
            self._pending.pop(request_id, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # mark retrieved: no "exception never retrieved" warnings

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a client→server notification ``{method, params?}``.

        :raises ConnectionLost: the connection has ended.
        :raises AppServerUnavailable: ``send-failed`` (another transport failure).
        """
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._write(json.dumps(message), method)

    async def respond(self, request_id: str | int, result: Any) -> None:
        """Answer server request ``request_id`` with ``result``.

        :raises ConnectionLost: closed. :raises AppServerUnavailable: ``send-failed``.
        """
        await self._write(json.dumps({"id": request_id, "result": result}))

    async def respond_error(self, request_id: str | int, code: int, message: str, data: Any = None) -> None:
        """Answer server request ``request_id`` with an error.

        :raises ConnectionLost: closed. :raises AppServerUnavailable: ``send-failed``.
        """
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self._write(json.dumps({"id": request_id, "error": error}))

    async def _write(self, payload: str, method: str | None = None) -> None:
        """The one writer of every message this client sends (``method``: the request or
        notification it belongs to, for errors). :raises ConnectionLost: the connection has
        ended or ends during the send. :raises AppServerUnavailable: ``send-failed``."""
        from websockets.exceptions import ConnectionClosed

        if self.closed:
            raise self._lost_error(method=method)
        try:
            await self._ws.send(payload)
        except ConnectionClosed as exc:
            await self._closed_soon()
            raise self._lost_error(_describe(exc), method) from exc
        except Exception as exc:
            raise AppServerUnavailable("send-failed", self.endpoint, _describe(exc), method) from exc

    async def _closed_soon(self) -> None:
        # the reader notices a dropped connection right after a send fails; give it a moment
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1):
                await self._closed.wait()

    # notifications -----------------------------------------------------------------------------
    def subscribe(
        self,
        callback: NotificationCallback,
        *,
        methods: Collection[str] | str | None = None,
        thread_id: str | None = None,
    ) -> Callable[[], None]:
        """Call ``callback(notification)`` for each matching notification; returns an unsubscriber.

        :param methods: only these methods (None: all).
        :param thread_id: only notifications whose ``params.threadId`` (or ``params.thread.id``)
            equals it.
        ``callback`` runs in the reader task, in arrival order; it may be a coroutine function
        (then it runs as its own task). Exceptions it raises are logged and ignored.
        """
        key = next(self._callback_ids)
        self._callbacks[key] = (_Filter(methods, thread_id), callback)

        def unsubscribe() -> None:
            self._callbacks.pop(key, None)

        return unsubscribe

    def subscription(
        self,
        *,
        methods: Collection[str] | str | None = None,
        thread_id: str | None = None,
        maxsize: int = 1000,
    ) -> Subscription:
        """A buffered :class:`Subscription` of matching notifications, active immediately.

        Create it *before* sending the request that triggers the notifications (some, e.g.
        ``turn/completed`` after ``turn/interrupt``, can arrive before the response). Use as
        ``async with client.subscription(...) as sub:`` or call ``sub.close()``.
        """
        sub = Subscription(self, _Filter(methods, thread_id), maxsize)
        if self.closed:
            sub._end()
        else:
            self._subscriptions.add(sub)
        return sub

    # reader ------------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        from websockets.exceptions import ConnectionClosed

        detail = ""
        try:
            async for raw in self._ws:
                try:
                    message = json.loads(raw)
                except (TypeError, ValueError):
                    log.warning("agent-link: app-server sent a non-JSON frame (%d bytes)", len(raw))
                    continue
                if isinstance(message, dict):
                    self._route(message)
            detail = "the app-server closed the connection"
        except ConnectionClosed as exc:
            detail = _describe(exc)
        except asyncio.CancelledError:
            detail = "reader cancelled"
            raise
        except Exception as exc:  # pragma: no cover - defensive: never leave requests hanging
            log.exception("agent-link: app-server reader failed")
            detail = _describe(exc)
        finally:
            self._finish("connection-lost", detail)

    def _route(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        has_id = "id" in message and message["id"] is not None
        if isinstance(method, str) and has_id:
            self._on_server_request(ServerRequest(message["id"], method, _params(message)))
        elif isinstance(method, str):
            self._on_notification(message, method)
        elif has_id:
            entry = self._pending.get(message["id"])
            if entry is None:
                self.late_responses += 1
                return
            req_method, future = entry
            if future.done():
                return
            error = message.get("error")
            if isinstance(error, dict):
                future.set_exception(
                    AppServerError(
                        int(error.get("code", 0)) if isinstance(error.get("code"), int) else 0,
                        str(error.get("message", "")),
                        req_method,
                        error.get("data"),
                    )
                )
            else:
                future.set_result(message.get("result"))

    def _on_notification(self, message: dict[str, Any], method: str) -> None:
        emitted = message.get("emittedAtMs")
        note = Notification(method, _params(message), emitted if isinstance(emitted, int) else None, message)
        if method in self.notification_counts or len(self.notification_counts) < _COUNTED_METHODS_MAX:
            self.notification_counts[method] = self.notification_counts.get(method, 0) + 1
        self.recent_notifications.append(note)
        for sub in list(self._subscriptions):
            sub._push(note)
        for flt, callback in list(self._callbacks.values()):
            if not flt(note):
                continue
            try:
                outcome = callback(note)
                if inspect.isawaitable(outcome):
                    self._spawn(_guard(outcome, method))
            except Exception:
                log.exception("agent-link: notification callback failed for %s", method)

    def _on_server_request(self, req: ServerRequest) -> None:
        self.server_request_counts[req.method] = self.server_request_counts.get(req.method, 0) + 1
        if self.refuse_server_requests:
            result, error = refusal_for(req.method)
            reply = {"id": req.id, "result": result} if error is None else {"id": req.id, "error": error}
            self._spawn(self._reply_quietly(reply))
        elif self.on_server_request is not None:
            self._spawn(self._handle_server_request(req, self.on_server_request))
        else:
            self.unanswered_server_requests += 1

    async def _handle_server_request(self, req: ServerRequest, handler: ServerRequestHandler) -> None:
        try:
            result = await handler(req)
        except AppServerError as exc:
            reply: dict[str, Any] = {"id": req.id, "error": {"code": exc.code, "message": exc.message}}
        except Exception as exc:
            log.exception("agent-link: server request handler failed for %s", req.method)
            reply = {"id": req.id, "error": {"code": -32603, "message": f"client error: {type(exc).__name__}"}}
        else:
            reply = {"id": req.id, "result": result}
        await self._reply_quietly(reply)

    async def _reply_quietly(self, reply: dict[str, Any]) -> None:
        with contextlib.suppress(AppServerUnavailable):  # the connection is gone or going: nobody to answer
            await self._write(json.dumps(reply))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _finish(self, reason: str, detail: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
            self._closed_detail = detail
        for req_method, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(self._lost_error(method=req_method))
        for sub in list(self._subscriptions):
            sub._end()
        self._subscriptions.clear()
        self._closed.set()

    # closing -----------------------------------------------------------------------------------
    async def close(self, timeout_ms: int = 2000) -> None:
        """Close the connection; pending requests fail with ``ConnectionLost`` (``client-closed``).

        Idempotent; bounded by ``timeout_ms``.
        """
        if self._closed_reason is None:
            self._closed_reason = "client-closed"
            self._closed_detail = "closed by the client"
        self._finish(self._closed_reason, self._closed_detail)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout_ms / 1000):
                await self._ws.close()
        if not self._reader.done():
            self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def abort(self) -> None:
        """Cut the connection now, without a closing handshake (synchronous; for an event loop
        that is shutting down and cannot wait for :meth:`close`). Pending requests then fail
        with :class:`ConnectionLost` as the reader notices."""
        transport = self._ws.transport
        if transport is not None:
            transport.abort()

    async def __aenter__(self) -> AppServerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _params(message: Mapping[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def _describe(exc: BaseException) -> str:
    from websockets.exceptions import InvalidStatus

    if isinstance(exc, InvalidStatus):
        return f"HTTP {exc.response.status_code} during the WebSocket handshake"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _guard(awaitable: Awaitable[Any], method: str) -> None:
    try:
        await awaitable
    except Exception:
        log.exception("agent-link: notification callback failed for %s", method)
