"""The messages of a Codex app-server connection (see :mod:`agent_link_codex.appserver`):
its errors, notifications and server requests, the refusals of requests this client does
not handle, and buffered notification streams (:class:`Subscription`)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_link_core.errors import AgentLinkError

    from agent_link_codex.appserver import AppServerClient

#: JSON-RPC "method not found", used to refuse server requests this client does not handle.
METHOD_NOT_FOUND = -32601


# errors ---------------------------------------------------------------------------------------
class AppServerException(Exception):
    """Base class of every error this module raises."""


class AppServerError(AppServerException):
    """The app-server answered a request with a JSON-RPC error.

    :ivar code: the JSON-RPC error code (int; ``-32600`` for most Codex application errors,
        ``-32602`` invalid params, ``-32001`` overloaded/retryable).
    :ivar message: the server's message, verbatim.
    :ivar method: the request method that failed.
    :ivar data: the error's optional ``data`` member.
    """

    def __init__(self, code: int, message: str, method: str, data: Any = None) -> None:
        super().__init__(f"{method}: [{code}] {message}")
        self.code = code
        self.message = message
        self.method = method
        self.data = data

    def to_agent_link_error(self) -> AgentLinkError:
        """This error as agent-link's ``upstream_error`` (details: method, rpcCode, rpcMessage)."""
        from agent_link_core.errors import AgentLinkError

        return AgentLinkError(
            "upstream_error",
            f"Codex app-server rejected {self.method}: {self.message}",
            {"method": self.method, "rpcCode": self.code, "rpcMessage": self.message},
        )


class AppServerUnavailable(AppServerException):
    """The app-server could not be reached or stopped answering (a transport failure).

    :ivar reason: a tag: ``open-failed`` (connect or handshake refused, socket missing, bad
        token), ``open-timeout``, ``request-timeout`` (no answer within the request's
        timeout), ``connection-lost`` (the connection dropped), ``client-closed``
        (:meth:`AppServerClient.close` was called), ``send-failed``.
    :ivar endpoint: ``unix://<path>`` or the WebSocket URL.
    :ivar method: the request method concerned, when there is one.
    :ivar detail: a human-readable cause.
    """

    def __init__(self, reason: str, endpoint: str, detail: str = "", method: str | None = None) -> None:
        text = f"Codex app-server at {endpoint} unavailable ({reason})"
        if method:
            text += f" during {method}"
        if detail:
            text += f": {detail}"
        super().__init__(text)
        self.reason = reason
        self.endpoint = endpoint
        self.detail = detail
        self.method = method

    def to_agent_link_error(self) -> AgentLinkError:
        """This error as agent-link's ``codex_unavailable`` (details: endpoint, reason)."""
        from agent_link_core.errors import AgentLinkError

        return AgentLinkError(
            "codex_unavailable",
            str(self),
            {"endpoint": self.endpoint, "reason": self.reason},
        )


class ConnectionLost(AppServerUnavailable):
    """The connection ended while a request was pending, or a request was made after it ended.

    ``reason`` is ``connection-lost`` (the server or transport went away) or ``client-closed``
    (this client closed it); :meth:`Subscription.next` on a subscription closed by its owner
    raises it with ``subscription-closed``.
    """


# messages --------------------------------------------------------------------------------------
def _thread_id_of(params: Mapping[str, Any]) -> str | None:
    tid = params.get("threadId")
    if isinstance(tid, str):
        return tid
    thread = params.get("thread")
    if isinstance(thread, Mapping) and isinstance(thread.get("id"), str):
        return thread["id"]
    return None


@dataclass(frozen=True)
class Notification:
    """A server→client notification.

    :ivar method: e.g. ``turn/completed``.
    :ivar params: the ``params`` object (``{}`` when absent).
    :ivar emitted_at_ms: the top-level ``emittedAtMs`` (unix ms) when present.
    :ivar raw: the whole decoded message.
    """

    method: str
    params: dict[str, Any]
    emitted_at_ms: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def thread_id(self) -> str | None:
        """``params.threadId``, else ``params.thread.id`` (``thread/started``), else None."""
        return _thread_id_of(self.params)


@dataclass(frozen=True)
class ServerRequest:
    """A server→client request (``{id, method, params}``), e.g. an approval or elicitation."""

    id: str | int
    method: str
    params: dict[str, Any]

    @property
    def thread_id(self) -> str | None:
        """``params.threadId`` when present."""
        return _thread_id_of(self.params)


_REFUSALS: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
    "mcpServer/elicitation/request": {"action": "decline"},
    "item/permissions/requestApproval": {"permissions": {}},
}


def refusal_for(method: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ``(result, error)`` pair that refuses server request ``method``; exactly one is set.

    Approvals are declined (``{decision:"decline"}``; legacy ``execCommandApproval`` /
    ``applyPatchApproval`` get ``{decision:"denied"}``), MCP elicitations get
    ``{action:"decline"}``, permission requests are granted nothing (``{permissions:{}}``);
    any other method gets error ``{code:-32601, message}``.
    """
    if method in _REFUSALS:
        return dict(_REFUSALS[method]), None
    return None, {"code": METHOD_NOT_FOUND, "message": f"agent-link does not handle {method}"}


NotificationCallback = Callable[[Notification], "Awaitable[None] | None"]
ServerRequestHandler = Callable[[ServerRequest], Awaitable[Any]]


class _Filter:
    def __init__(self, methods: Collection[str] | str | None, thread_id: str | None) -> None:
        self.methods = frozenset([methods] if isinstance(methods, str) else methods) if methods is not None else None
        self.thread_id = thread_id

    def __call__(self, note: Notification) -> bool:
        if self.methods is not None and note.method not in self.methods:
            return False
        return self.thread_id is None or note.thread_id == self.thread_id


_END = object()


class Subscription:
    """A buffered stream of matching notifications (from :meth:`AppServerClient.subscription`).

    Buffers up to ``maxsize`` notifications (oldest dropped beyond that; :attr:`dropped`
    counts them). Iterating (``async for``) ends when the subscription is closed or the
    connection ends; :meth:`next` and :meth:`wait_for` raise instead.
    """

    def __init__(self, client: AppServerClient, flt: _Filter, maxsize: int) -> None:
        self._client = client
        self._filter = flt
        self._buffer: deque[Any] = deque()
        self._maxsize = maxsize
        self._event = asyncio.Event()
        self._ended = False
        self.dropped = 0

    def _push(self, note: Notification) -> None:
        if self._ended or not self._filter(note):
            return
        if len(self._buffer) >= self._maxsize:
            self._buffer.popleft()
            self.dropped += 1
        self._buffer.append(note)
        self._event.set()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._buffer.append(_END)
            self._event.set()

    async def next(self, timeout_ms: int | None = None) -> Notification:
        """The next matching notification, waiting up to ``timeout_ms`` (None: forever).

        :raises TimeoutError: nothing arrived in time.
        :raises ConnectionLost: the connection ended (or the subscription was closed) first.
        """
        async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
            while True:
                if self._buffer:
                    item = self._buffer[0]
                    if item is _END:
                        client = self._client
                        reason = client.closed_reason or "subscription-closed"
                        raise ConnectionLost(reason, client.endpoint, "the subscription ended")
                    self._buffer.popleft()
                    return item
                self._event.clear()
                await self._event.wait()

    async def wait_for(
        self, predicate: Callable[[Notification], bool] | None = None, timeout_ms: int | None = None
    ) -> Notification:
        """The next notification satisfying ``predicate`` (non-matching ones are consumed).

        :raises TimeoutError: none within ``timeout_ms``.
        :raises ConnectionLost: the connection ended first.
        """
        async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
            while True:
                note = await self.next()
                if predicate is None or predicate(note):
                    return note

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Notification]:
        while True:
            try:
                yield await self.next()
            except ConnectionLost:
                return

    def close(self) -> None:
        """Stop receiving; pending iteration ends."""
        self._client._subscriptions.discard(self)
        self._end()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
