"""A stub OpenAI Responses API for driving the real Codex CLI in tests (stdlib only).

Codex (0.169.0) configured with a ``[model_providers.<name>]`` entry whose ``base_url`` is
:attr:`ResponsesStub.base_url` and ``wire_api = "responses"`` sends every model request as
``POST {base_url}/responses`` with a JSON body and reads a server-sent-event stream back
(docs/hosts/codex.md §3). The stub records every request and answers each
one with a scripted :class:`Reply`:

>>> with ResponsesStub() as stub:                       # doctest: +SKIP
...     stub.enqueue(text("hello"))                      # next request gets "hello"
...     stub.enqueue(mcp_tool_call("agent-link", "ping", {"x": 1}), text("done"))
...     ...                                              # drive Codex
...     assert stub.saw_text("my prompt")

Reply selection for each request, first match wins: the queue filled by :meth:`enqueue`
(FIFO, shared by all threads), then the ``responder`` callable (``request -> Reply | None``),
then the default reply (assistant text ``"ok"``).

A reply may be delayed or held (:class:`Hold`) so a test can keep a Codex turn active, e.g.
to steer it; the stub notices when Codex gives up on a held request (it closes the HTTP
connection when input is steered into a turn whose stream has begun: use
``stream_first=True``) and marks the request :attr:`StubRequest.cancelled`.

Only ``POST …/responses`` is served; anything else is recorded and answered 404.
"""

from __future__ import annotations

import gzip
import itertools
import json
import select
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Hold",
    "Reply",
    "ResponsesStub",
    "StubRequest",
    "function_call",
    "http_error",
    "mcp_tool_call",
    "text",
]

_ids = itertools.count(1)


def _next_id() -> int:
    return next(_ids)


class Hold:
    """A gate that keeps a reply from being sent until released (thread-safe).

    Attach it to a reply (``text("late", hold=h)``); the request that draws that reply then
    waits until :meth:`release` is called, the client disconnects, or ``timeout_s`` (seconds)
    passes, whichever comes first. :meth:`wait_arrived` lets a test wait until the held
    request has reached the stub (i.e. the Codex turn is in flight).

    Observed on Codex 0.169.0 when input is steered into the held turn: if the reply was made
    with ``stream_first=True`` (headers and ``response.created`` already sent), Codex drops the
    in-flight request at once (the request ends up :attr:`StubRequest.cancelled`) and sends a
    new one with the steered input appended; if nothing was sent yet, Codex waits for the held
    reply to finish and only then sends the follow-up request.
    """

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._released = threading.Event()
        self._arrived = threading.Event()

    def release(self) -> None:
        """Let the held reply (and any later one using this hold) go out."""
        self._released.set()

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._released.is_set()

    def wait_arrived(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` seconds until a request is held here; returns whether it was."""
        return self._arrived.wait(timeout_s)

    def _mark_arrived(self) -> None:
        self._arrived.set()


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one ``POST /responses``.

    :param items: Responses API output items streamed as ``response.output_item.done`` events,
        in order (assistant ``message`` items, ``function_call`` items, ...).
    :param delay_s: seconds to wait before answering.
    :param hold: wait for this gate before answering (after ``delay_s``).
    :param status: HTTP status; anything but 200 sends ``error_body`` as JSON instead of a stream.
    :param error_body: JSON body for a non-200 status.
    :param stream_first: send the response headers and ``response.created`` before the delay
        and hold, so the stream has begun while the turn waits (Codex treats a started stream
        differently from a request that has not been answered at all; see :class:`Hold`).
    """

    items: tuple[dict[str, Any], ...] = ()
    delay_s: float = 0.0
    hold: Hold | None = None
    stream_first: bool = False
    status: int = 200
    error_body: dict[str, Any] | None = None


def text(
    message: str = "ok", *, delay_s: float = 0.0, hold: Hold | None = None, stream_first: bool = False
) -> Reply:
    """A reply holding one assistant message with ``message`` as its text."""
    item = {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{_next_id()}",
        "content": [{"type": "output_text", "text": message}],
    }
    return Reply(items=(item,), delay_s=delay_s, hold=hold, stream_first=stream_first)


def function_call(
    name: str,
    arguments: dict[str, Any] | str | None = None,
    *,
    namespace: str | None = None,
    call_id: str | None = None,
    delay_s: float = 0.0,
    hold: Hold | None = None,
    stream_first: bool = False,
) -> Reply:
    """A reply asking Codex to call tool ``name`` with ``arguments`` (a dict or a JSON string).

    ``namespace`` selects a namespace tool (MCP tools are ``mcp__<server>``); Codex 0.169.0
    does not accept a flat ``mcp__<server>__<tool>`` name. Codex answers with a new request whose
    input ends with the ``function_call`` and its ``function_call_output``; script that one
    too (or let the default ``"ok"`` end the turn).
    """
    n = _next_id()
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    item: dict[str, Any] = {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": call_id or f"call_{n}",
        "name": name,
        "arguments": args,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return Reply(items=(item,), delay_s=delay_s, hold=hold, stream_first=stream_first)


def mcp_tool_call(
    server: str,
    tool: str,
    arguments: dict[str, Any] | str | None = None,
    **kwargs: Any,
) -> Reply:
    """A reply calling MCP tool ``tool`` of config server ``server`` (namespace ``mcp__<server>``)."""
    return function_call(tool, arguments, namespace=f"mcp__{server}", **kwargs)


def http_error(status: int = 500, message: str = "stub error", **kwargs: Any) -> Reply:
    """A non-streaming error reply (note: Codex retries 5xx answers a few times)."""
    body = {"error": {"message": message, "type": "stub_error", "code": None}}
    return Reply(status=status, error_body=body, **kwargs)


@dataclass
class StubRequest:
    """One request the stub received.

    :ivar index: 0-based arrival order.
    :ivar method: HTTP method; :ivar path: request path (``/v1/responses``).
    :ivar headers: header names lower-cased.
    :ivar body: the parsed JSON body (``{}`` when absent or not JSON).
    :ivar reply: the reply chosen (None for unknown paths).
    :ivar cancelled: the client hung up before the reply was complete (e.g. a steer).
    :ivar completed: the whole reply was written.
    """

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float = field(default_factory=time.monotonic)
    reply: Reply | None = None
    cancelled: bool = False
    completed: bool = False

    @property
    def thread_id(self) -> str | None:
        """The Codex thread id (``thread-id`` header), the easiest way to tell threads apart."""
        return self.headers.get("thread-id")

    @property
    def input(self) -> list[dict[str, Any]]:
        """The ``input`` items of the body."""
        items = self.body.get("input")
        return items if isinstance(items, list) else []

    def texts(self, role: str | None = None) -> list[str]:
        """Every text of ``message`` input items (optionally only of ``role``), in order."""
        out: list[str] = []
        for item in self.input:
            if item.get("type") != "message" or (role is not None and item.get("role") != role):
                continue
            content = item.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        return out

    def user_texts(self) -> list[str]:
        """Texts of user messages (includes Codex's ``<environment_context>`` message)."""
        return self.texts("user")

    def contains(self, needle: str) -> bool:
        """Whether ``needle`` occurs in any message text or function-call output of the input."""
        if any(needle in t for t in self.texts()):
            return True
        return any(needle in json.dumps(o) for o in self.function_call_outputs())

    def function_call_outputs(self) -> list[Any]:
        """The ``output`` of each ``function_call_output`` input item (string or parts list)."""
        return [i.get("output") for i in self.input if i.get("type") == "function_call_output"]

    def function_call_output_texts(self) -> list[str]:
        """Each ``function_call_output`` as one string (parts joined with newlines).

        Observed on 0.169.0 for MCP tools: ``"Wall time: … seconds\nOutput:\n<json>"`` when the
        tool returned ``structuredContent``; a list of ``input_text`` parts
        (``["Wall time: … seconds\nOutput:", "<text>", …]``) for plain content.
        """
        texts: list[str] = []
        for output in self.function_call_outputs():
            if isinstance(output, list):
                texts.append("\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict)))
            else:
                texts.append(str(output))
        return texts

    @property
    def last_input(self) -> dict[str, Any] | None:
        """The last input item, or None."""
        return self.input[-1] if self.input else None

    def tool_names(self) -> list[str]:
        """Names of the model-facing tools; namespace tools as ``<namespace>/<tool>``."""
        names: list[str] = []
        for tool in self.body.get("tools") or []:
            if tool.get("type") == "namespace":
                names.extend(f"{tool.get('name')}/{t.get('name')}" for t in tool.get("tools") or [])
            else:
                names.append(str(tool.get("name")))
        return names


Responder = Callable[[StubRequest], "Reply | None"]


class ResponsesStub:
    """The stub server: an HTTP server on 127.0.0.1 with an ephemeral port, in a thread.

    Use as a context manager (or :meth:`start` / :meth:`stop`). Thread-safe; all timeouts in
    seconds.

    :param responder: optional ``request -> Reply | None`` consulted when the queue is empty.
    :param default: the reply when neither queue nor responder supplies one (text ``"ok"``).
    """

    def __init__(self, responder: Responder | None = None, default: Reply | None = None) -> None:
        self.responder = responder
        self.default = default
        self._queue: deque[Reply] = deque()
        self._requests: list[StubRequest] = []
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._holds: list[Hold] = []

    # lifecycle -------------------------------------------------------------------------
    def start(self) -> ResponsesStub:
        """Bind 127.0.0.1:0 and serve in a daemon thread."""
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="responses-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release every hold, stop serving and close the listening socket."""
        self._stopping.set()
        with self._cond:
            holds = list(self._holds)
        for hold in holds:
            hold.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> ResponsesStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # addresses ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The listening port."""
        assert self._server is not None, "stub not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the ``base_url`` for Codex's model provider."""
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting -----------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        """Append replies; each request takes the oldest queued one."""
        with self._cond:
            self._queue.extend(replies)

    def hold(self, timeout_s: float = 30.0) -> Hold:
        """A new :class:`Hold` that :meth:`stop` releases (so no request thread lingers)."""
        gate = Hold(timeout_s)
        with self._cond:
            self._holds.append(gate)
        return gate

    def _choose(self, request: StubRequest) -> Reply:
        with self._cond:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            chosen = self.responder(request)
            if chosen is not None:
                return chosen
        return self.default or text("ok")

    # observation ---------------------------------------------------------------------------
    @property
    def requests(self) -> list[StubRequest]:
        """A snapshot of every recorded request, in arrival order."""
        with self._cond:
            return list(self._requests)

    def responses_requests(self) -> list[StubRequest]:
        """Only the ``POST …/responses`` requests."""
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/responses")]

    def saw_text(self, needle: str) -> bool:
        """Whether any model request contained ``needle`` in a message text or tool output."""
        return any(r.contains(needle) for r in self.requests)

    def wait_for(self, predicate: Callable[[StubRequest], bool], timeout_s: float) -> StubRequest:
        """The first request (in arrival order) matching ``predicate``, waiting up to ``timeout_s``.

        :raises TimeoutError: none matched in time (the message lists what arrived).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for r in self._requests:
                    if predicate(r):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    summary = [(r.path, r.thread_id, r.texts()[-1:]) for r in self._requests]
                    raise TimeoutError(f"no matching stub request within {timeout_s}s; got {summary}")
                self._cond.wait(left)

    def wait_for_requests(self, count: int, timeout_s: float) -> list[StubRequest]:
        """Wait until at least ``count`` requests arrived; returns them all.

        :raises TimeoutError: fewer arrived in time.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._requests)} of {count} stub requests within {timeout_s}s")
                self._cond.wait(left)
            return list(self._requests)

    def _record(self, method: str, path: str, headers: dict[str, str], body: dict[str, Any]) -> StubRequest:
        with self._cond:
            req = StubRequest(len(self._requests), method, path, headers, body)
            self._requests.append(req)
            self._cond.notify_all()
            return req

    def _changed(self) -> None:
        with self._cond:
            self._cond.notify_all()


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _peer_closed(conn: socket.socket) -> bool:
    """Whether the client hung up (the request body was already read, so readable means EOF)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        if not readable:
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _Handler(BaseHTTPRequestHandler):
    owner: ResponsesStub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        encoding = (self.headers.get("content-encoding") or "").lower()
        try:
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding == "deflate":
                raw = zlib.decompress(raw)
            parsed = json.loads(raw) if raw else {}
        except (ValueError, OSError, zlib.error):
            return {"_undecodable": True, "_content_encoding": encoding, "_size": len(raw)}
        return parsed if isinstance(parsed, dict) else {"_body": parsed}

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.owner._record("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, {})
        self._send_json(404, {"error": {"message": "not served by the stub"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        body = self._read_body()
        req = self.owner._record("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if not self.path.rstrip("/").endswith("/responses"):
            self._send_json(404, {"error": {"message": "not served by the stub"}})
            return
        reply = self.owner._choose(req)
        req.reply = reply
        response_id = f"resp_{_next_id()}"
        try:
            if reply.stream_first and reply.status == 200:
                self._start_stream(response_id)
            if not self._wait(reply):
                req.cancelled = True
                self.close_connection = True
                return
            if reply.status != 200:
                self._send_json(reply.status, reply.error_body or {})
            else:
                if not reply.stream_first:
                    self._start_stream(response_id)
                self._finish_stream(reply, response_id)
            req.completed = True
        except OSError:
            req.cancelled = True
            self.close_connection = True
        finally:
            self.owner._changed()

    def _wait(self, reply: Reply) -> bool:
        """Apply delay and hold; False when the client hung up meanwhile."""
        end_delay = time.monotonic() + reply.delay_s
        hold = reply.hold
        hold_deadline = None
        if hold is not None:
            hold._mark_arrived()
            hold_deadline = time.monotonic() + reply.delay_s + hold.timeout_s
        while True:
            now = time.monotonic()
            delay_done = now >= end_delay
            hold_done = hold is None or hold.released or (hold_deadline is not None and now >= hold_deadline)
            if delay_done and hold_done:
                return True
            if self.owner._stopping.is_set():
                return False
            if _peer_closed(self.connection):
                return False
            time.sleep(0.02)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _start_stream(self, response_id: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        self._chunk(_sse("response.created", {"type": "response.created", "response": {"id": response_id}}))

    def _finish_stream(self, reply: Reply, response_id: str) -> None:
        for item in reply.items:
            self._chunk(_sse("response.output_item.done", {"type": "response.output_item.done", "item": item}))
        usage = {
            "input_tokens": 10,
            "input_tokens_details": None,
            "output_tokens": 5,
            "output_tokens_details": None,
            "total_tokens": 15,
        }
        completed = {"type": "response.completed", "response": {"id": response_id, "usage": usage}}
        self._chunk(_sse("response.completed", completed))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
