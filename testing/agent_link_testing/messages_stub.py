"""A stub Anthropic Messages API on 127.0.0.1 for driving the real Claude Code CLI in tests.

Standard library only. Start it as a context manager and point Claude Code at it with
``ANTHROPIC_BASE_URL=stub.base_url`` (see :mod:`agent_link_testing.claude_host`)::

    with MessagesStub() as stub:
        stub.enqueue(Reply.tool_use("mcp__srv__echo", {"text": "hi"}), "done")
        ...run claude -p...
        assert stub.main_requests[1].tool_results()[0]["content"] ...

Endpoints served (what Claude Code calls, see docs/hosts/claude-code.md §2; verified on 2.1.197 and 2.1.332):

* ``POST /v1/messages[?beta=true]`` -- answered with the next scripted :class:`Reply`, as SSE
  when the body has ``"stream": true`` (Claude Code always streams), else as one JSON message.
* ``POST /v1/messages/count_tokens[?beta=true]`` -- ``{"input_tokens": <len(body)//4>}``; never
  consumes a scripted reply.
* ``HEAD`` / ``GET`` on any path (the startup preconnect is ``HEAD /``) -- ``200`` empty / ``{}``.
* ``CONNECT host:port`` -- recorded (``kind == "connect"``) and refused with ``403``. This lets
  the stub double as a black-hole HTTPS proxy (``HTTPS_PROXY=stub.base_url``) so tests can
  assert that nothing tried to leave the machine.
* Anything else -- ``404`` with an Anthropic-shaped error body.

Which requests consume the script (the *main-conversation rule*)
----------------------------------------------------------------
A ``POST /v1/messages`` request is ``kind == "main"`` when its body **offers tools (non-empty
``tools``) or carries ``context_management``**; every other one is ``kind == "side"``.

Why (verified on 2.1.197): every turn of the main agent loop (sub-agents not exercised)
is sent with the tool list (24-28 built-ins plus MCP tools) and with ``context_management``
(``clear_thinking_20251015``) and ``thinking: {"type": "adaptive"}``; with ``--tools ""`` the
list is empty but ``context_management`` is still there. The one side request observed, the
interactive *session-title* request (sent around the 2nd prompt of an interactive session, with
or without ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``; not for a lone "hi"), has ``tools: []``, ``thinking:
{"type": "disabled"}``, no ``context_management`` and ``output_config.format = {"type":
"json_schema", schema {title: string}}``. No side request (title, quota probe, ...) was seen in
``claude -p`` runs. Only ``main`` requests pop the script queue; side requests are answered by
``side_reply`` (default :func:`default_side_reply`: a JSON object with a value for each schema
property when structured output is asked for -- ``{"title": "Stub session"}`` -- else a short
text). Pass ``is_main=`` to change the rule (e.g. a non-thinking ``--model`` together with
``--tools ""`` would make main turns look like side requests).

When the queue is empty a ``main`` request gets ``Reply.text(default_text)`` and is listed in
:attr:`MessagesStub.unscripted`, so tests can assert their script covered the whole run.

One script per conversation
---------------------------
The shared queue answers ``main`` requests in arrival order, whichever conversation sends them.
When a test runs turns in several sessions of one host, a turn still in flight (its follow-up
request after a tool result not sent yet, or a turn held by a permission question) would take
the next conversation's reply. ``enqueue(..., conversation=MARKER)`` keeps a queue of its own
for the ``main`` requests whose first user message contains ``MARKER`` (put it in the prompt,
e.g. the session id); such requests never take from the shared queue, and get
``default_text`` when their own queue is empty.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Union
from urllib.parse import parse_qs, urlsplit

__all__ = ["MessagesStub", "RecordedRequest", "Reply", "ScriptItem"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the stub.

    ``blocks`` are Messages API content blocks: ``{"type": "text", "text": str}`` or
    ``{"type": "tool_use", "id": str, "name": str, "input": dict}``. ``stop_reason`` is
    ``"end_turn"`` or ``"tool_use"``. ``delay_s`` (seconds) is slept before answering, to keep a
    turn "in flight". A non-200 ``status`` sends ``error`` as an Anthropic error body instead of a
    message (Claude Code retries 5xx/429 with back-off, so prefer 4xx such as 400 in tests).
    Build replies with the class methods.
    """

    blocks: tuple[dict[str, Any], ...] = ()
    stop_reason: str = "end_turn"
    delay_s: float = 0.0
    status: int = 200
    error: dict[str, Any] | None = None

    @classmethod
    def text(cls, text: str, *, delay_s: float = 0.0) -> "Reply":
        """A plain assistant text answer ending the turn (``stop_reason="end_turn"``)."""
        return cls(blocks=({"type": "text", "text": text},), delay_s=delay_s)

    @classmethod
    def tool_use(
        cls,
        name: str,
        input: dict[str, Any] | None = None,  # noqa: A002 - the API's field name
        *,
        id: str | None = None,  # noqa: A002 - the API's field name
        text: str | None = None,
        delay_s: float = 0.0,
    ) -> "Reply":
        """A call of tool ``name`` (e.g. ``"mcp__srv__echo"``) with JSON object ``input``.

        ``text`` optionally precedes the call as a text block. ``id`` defaults to a fresh
        ``toolu_…`` id. The turn stops with ``stop_reason="tool_use"``; Claude Code runs the tool
        and sends the result in its next request -- script the answer to that as the next reply.
        """
        blocks: list[dict[str, Any]] = []
        if text:
            blocks.append({"type": "text", "text": text})
        blocks.append(
            {
                "type": "tool_use",
                "id": id or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": name,
                "input": dict(input or {}),
            }
        )
        return cls(blocks=tuple(blocks), stop_reason="tool_use", delay_s=delay_s)

    @classmethod
    def api_error(
        cls, status: int = 400, message: str = "stub error", *, type: str = "invalid_request_error"  # noqa: A002
    ) -> "Reply":
        """An HTTP error ``status`` with body ``{"type":"error","error":{"type","message"}}``."""
        return cls(status=status, error={"type": type, "message": message})


#: What the script queue (or ``side_reply``) may hold: a :class:`Reply`, a string (shorthand for
#: ``Reply.text``), or a callable receiving the :class:`RecordedRequest` and returning either.
ScriptItem = Union[Reply, str, Callable[["RecordedRequest"], Union[Reply, str]]]


@dataclass
class RecordedRequest:
    """One HTTP request the stub received (recorded before it is answered).

    ``path`` excludes the query string (``query`` holds it, e.g. ``{"beta": ["true"]}``);
    ``headers`` has lower-cased names; ``body`` is the parsed JSON body or ``None``; ``kind`` is
    one of ``"main"``, ``"side"``, ``"count_tokens"``, ``"preconnect"`` (HEAD/GET),
    ``"connect"`` (proxy CONNECT; ``path`` is ``host:port``) or ``"other"``; ``reply`` is what
    the stub answered (``None`` for non-message endpoints); ``received_at`` is
    ``time.monotonic()`` seconds; ``unscripted`` is true for a ``main`` request answered with the
    stub's ``default_text`` because the script was empty.
    """

    seq: int
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw_body: bytes
    body: Any
    kind: str = "other"
    reply: Reply | None = None
    received_at: float = 0.0
    unscripted: bool = False

    # -- convenience views over a Messages request body ---------------------------------------
    @property
    def session_id(self) -> str | None:
        """The ``X-Claude-Code-Session-Id`` header (the Claude Code session uuid), if sent."""
        return self.headers.get("x-claude-code-session-id")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """``body["messages"]`` (all entries, including mid-conversation ``role:"system"`` ones)."""
        return list((self.body or {}).get("messages") or []) if isinstance(self.body, dict) else []

    def conversation(self) -> list[dict[str, Any]]:
        """``messages`` without the ``role:"system"`` entries Claude Code inserts mid-conversation."""
        return [m for m in self.messages if m.get("role") != "system"]

    def last_user_message(self) -> dict[str, Any] | None:
        """The last ``role:"user"`` message (skipping mid-conversation system entries), or ``None``."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return m
        return None

    def first_user_text(self) -> str:
        """The text of the first ``role:"user"`` message (its text blocks joined by newlines;
        ``""`` when there is none) -- what :meth:`MessagesStub.enqueue`'s ``conversation``
        marker is looked for in."""
        first = next((m for m in self.messages if isinstance(m, dict) and m.get("role") == "user"), None)
        content = (first or {}).get("content")
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str))

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the last user message (``[]`` when there are none)."""
        last = self.last_user_message()
        content = (last or {}).get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]

    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model in this request (``body["tools"][*].name``)."""
        tools = (self.body or {}).get("tools") if isinstance(self.body, dict) else None
        return [t.get("name", "") for t in tools or [] if isinstance(t, dict)]

    def system_text(self) -> str:
        """The top-level ``system`` prompt as one string (text blocks joined by newlines)."""
        system = (self.body or {}).get("system") if isinstance(self.body, dict) else None
        if isinstance(system, str):
            return system
        return "\n".join(b.get("text", "") for b in system or [] if isinstance(b, dict))

    def text(self) -> str:
        """The whole JSON body re-serialised (non-ASCII kept) -- for plain substring asserts."""
        return json.dumps(self.body, ensure_ascii=False) if self.body is not None else ""

    def locate(self, needle: str) -> list[str]:
        """JSON paths of every string in the body containing ``needle``.

        Example result: ``["messages[1].content[0].text"]``. Useful to pin down *where* some
        injected context reached the model.
        """
        found: list[str] = []

        def walk(node: Any, path: str) -> None:
            if isinstance(node, str):
                if needle in node:
                    found.append(path or "$")
            elif isinstance(node, dict):
                for k, v in node.items():
                    walk(v, f"{path}.{k}" if path else str(k))
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{path}[{i}]")

        walk(self.body, "")
        return found


def tool_result(request: RecordedRequest) -> dict[str, Any]:
    """The JSON object of the single tool result in ``request`` (an agent-link tool's answer).

    :raises ValueError: the request carries no tool result or more than one.
    :raises json.JSONDecodeError: the result's text is not JSON.
    """
    [block] = request.tool_results()
    content = block["content"]
    return json.loads(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))


def default_is_main(request: RecordedRequest) -> bool:
    """The main-conversation rule: ``POST /v1/messages`` offering tools or carrying ``context_management``."""
    body = request.body
    return (
        request.method == "POST"
        and request.path.rstrip("/") == "/v1/messages"
        and isinstance(body, dict)
        and (bool(body.get("tools")) or "context_management" in body)
    )


def default_side_reply(request: RecordedRequest) -> Reply:
    """Answer for side requests: a JSON title object if JSON output is requested, else text."""
    body = request.body if isinstance(request.body, dict) else {}
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        props = ((fmt.get("schema") or {}).get("properties") or {}).keys()
        return Reply.text(json.dumps({k: "Stub session" for k in props} or {"title": "Stub session"}))
    return Reply.text("Stub session")


class MessagesStub:
    """Threaded HTTP server implementing enough of the Anthropic Messages API for Claude Code.

    Use as a context manager (or call :meth:`start` / :meth:`stop`). Attributes after start:
    ``port`` (ephemeral int) and ``base_url`` (``"http://127.0.0.1:<port>"``). Thread-safe:
    the recorded lists may be read while Claude Code is running.

    Args:
        script: initial script items (see :data:`ScriptItem`), consumed in order by ``main``
            requests; add more with :meth:`enqueue`.
        default_text: text answered to ``main`` requests once the script is exhausted.
        side_reply: item answering requests that are not ``main`` (see the module docstring).
        is_main: predicate deciding which ``POST /v1/messages`` requests consume the script.
        model: model name echoed in replies (default: the request's ``model``).
    """

    def __init__(
        self,
        script: list[ScriptItem] | tuple[ScriptItem, ...] = (),
        *,
        default_text: str = "stub: no scripted reply left",
        side_reply: ScriptItem = default_side_reply,
        is_main: Callable[[RecordedRequest], bool] = default_is_main,
        model: str | None = None,
    ) -> None:
        self._script: deque[ScriptItem] = deque(script)
        self._conversations: dict[str, deque[ScriptItem]] = {}
        self.default_text = default_text
        self.side_reply = side_reply
        self.is_main = is_main
        self.model = model
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int = 0
        self.base_url: str = ""

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "MessagesStub":
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread; returns ``self``."""
        if self._server is not None:
            raise RuntimeError("MessagesStub already started")
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        self._server = server
        self.port = server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"messages-stub:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent; waits at most ~5 s for the thread)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # cuts short any Reply.delay_s sleep
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "MessagesStub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------------
    def enqueue(self, *items: ScriptItem, conversation: str | None = None) -> None:
        """Append script items for upcoming ``main`` requests (FIFO).

        :param items: the replies, in order (see :data:`ScriptItem`).
        :param conversation: a non-empty marker: the items answer only ``main`` requests whose
            first user message contains it (see "One script per conversation" above); default
            the shared queue.
        :raises ValueError: ``conversation`` is the empty string.
        """
        if conversation == "":
            raise ValueError("conversation must be a non-empty marker")
        with self._cond:
            if conversation is None:
                self._script.extend(items)
            else:
                self._conversations.setdefault(conversation, deque()).extend(items)

    @property
    def pending_script(self) -> int:
        """Number of script items not yet consumed (the shared queue and every conversation's)."""
        with self._cond:
            return len(self._script) + sum(len(queue) for queue in self._conversations.values())

    # -- recorded requests --------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, in arrival order."""
        with self._cond:
            return list(self._requests)

    def requests_of(self, kind: str) -> list[RecordedRequest]:
        """The recorded requests with ``kind == kind`` (see :class:`RecordedRequest`)."""
        return [r for r in self.requests if r.kind == kind]

    @property
    def main_requests(self) -> list[RecordedRequest]:
        """The ``main`` (script-consuming) Messages requests, in order."""
        return self.requests_of("main")

    @property
    def unscripted(self) -> list[RecordedRequest]:
        """``main`` requests answered with ``default_text`` because the script was empty."""
        return [r for r in self.main_requests if r.unscripted]

    def wait_for(self, predicate: Callable[[list[RecordedRequest]], bool], timeout_s: float = 30.0) -> bool:
        """Block until ``predicate(requests)`` is true or ``timeout_s`` seconds pass; returns it."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(list(self._requests)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.5))
            return True

    def wait_for_main(self, count: int, timeout_s: float = 30.0) -> list[RecordedRequest]:
        """Wait for ``count`` ``main`` requests; returns them, or raises ``TimeoutError``."""
        if not self.wait_for(lambda rs: sum(r.kind == "main" for r in rs) >= count, timeout_s):
            raise TimeoutError(f"stub saw {len(self.main_requests)} main requests, wanted {count} in {timeout_s}s")
        return self.main_requests

    # -- called by the handler ----------------------------------------------------------------
    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            req.seq = len(self._requests)
            self._requests.append(req)
            self._cond.notify_all()

    def _reply_for(self, req: RecordedRequest) -> Reply:
        """Classify ``req`` as main/side and resolve its reply (called before recording)."""
        if self.is_main(req):
            req.kind = "main"
            with self._cond:
                opening = req.first_user_text() if self._conversations else ""
                queue = next((q for marker, q in self._conversations.items() if marker in opening), self._script)
                item: ScriptItem | None = queue.popleft() if queue else None
            if item is None:
                req.unscripted = True
                item = self.default_text
        else:
            req.kind = "side"
            item = self.side_reply
        if callable(item) and not isinstance(item, Reply):
            item = item(req)
        return Reply.text(item) if isinstance(item, str) else item


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    stub: MessagesStub

    def handle_error(self, request: Any, client_address: Any) -> None:
        # claude killed mid-response (timeouts) resets the connection; nothing to report
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries Content-Length
    server: _Server
    server_version = "agent-link-messages-stub/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
        return

    # -- plumbing -----------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            data = b"".join(chunks)
        else:
            length = int(self.headers.get("content-length") or 0)
            data = self.rfile.read(length) if length else b""
        encoding = self.headers.get("content-encoding", "").lower()
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "deflate":
            data = zlib.decompress(data)
        return data

    def _make_request(self, body_bytes: bytes) -> RecordedRequest:
        parts = urlsplit(self.path)
        try:
            body = json.loads(body_bytes) if body_bytes else None
        except ValueError:
            body = None
        return RecordedRequest(
            seq=-1,
            method=self.command,
            path=parts.path or self.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            raw_body=body_bytes,
            body=body,
            received_at=time.monotonic(),
        )

    def _send(self, status: int, body: bytes, content_type: str = "application/json", extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.send_header("request-id", f"req_stub_{uuid.uuid4().hex[:20]}")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    # -- verbs --------------------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802
        req = self._make_request(b"")
        req.kind = "preconnect"
        self.server.stub._record(req)
        self._send(200, b"")

    def do_GET(self) -> None:  # noqa: N802
        req = self._make_request(b"")
        req.kind = "preconnect" if urlsplit(self.path).path in ("", "/") else "other"
        self.server.stub._record(req)
        self._send_json(200, {})

    def do_CONNECT(self) -> None:  # noqa: N802
        req = self._make_request(b"")
        req.kind = "connect"
        req.path = self.path  # host:port
        self.server.stub._record(req)
        self.close_connection = True
        self._send(403, b"", extra={"connection": "close"})

    def do_POST(self) -> None:  # noqa: N802
        stub = self.server.stub
        req = self._make_request(self._read_body())
        path = req.path.rstrip("/")
        if path == "/v1/messages/count_tokens":
            req.kind = "count_tokens"
            stub._record(req)
            self._send_json(200, {"input_tokens": max(1, len(req.raw_body) // 4)})
            return
        if path != "/v1/messages":
            stub._record(req)
            self._send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"stub: no route {req.path}"}})
            return
        try:
            reply = stub._reply_for(req)
        except Exception as exc:  # a broken script callable must not hang Claude Code
            reply = Reply.api_error(400, f"stub script raised {exc!r}")
        req.reply = reply
        stub._record(req)
        if reply.delay_s and stub._stopping.wait(reply.delay_s):
            return  # stub stopping: drop the connection unanswered
        if reply.status != 200:
            self._send_json(reply.status, {"type": "error", "error": reply.error or {"type": "api_error", "message": "stub"}})
            return
        model = stub.model or (req.body or {}).get("model") or "claude-stub"
        message = _message(reply, model)
        if isinstance(req.body, dict) and req.body.get("stream"):
            self._send(200, b"".join(_sse_events(message)), "text/event-stream; charset=utf-8", {"cache-control": "no-cache"})
        else:
            self._send_json(200, message)


def _message(reply: Reply, model: str) -> dict[str, Any]:
    out_tokens = max(1, sum(len(json.dumps(b)) for b in reply.blocks) // 4)
    return {
        "id": f"msg_stub_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(b) for b in reply.blocks],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": out_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _sse_events(message: dict[str, Any]) -> Iterator[bytes]:
    """The SSE event sequence of a streamed message (see docs/hosts/claude-code.md §2)."""
    start = dict(message, content=[], stop_reason=None, stop_sequence=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    yield _sse("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        elif block["type"] == "text":
            head = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:  # any other block type is sent whole in its start event
            head, delta = block, None
        yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": head})
        if delta is not None:
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})
