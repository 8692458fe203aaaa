"""The stdio transport of ``agent-link mcp``: every request line gets an answer.

The MCP SDK's own stdio transport (``mcp.server.stdio.stdio_server``) hands a line it cannot
validate to the server as an exception, and the server answers nothing: a request whose JSON
holds a lone UTF-16 surrogate escape (``"\\ud800"``, which a model can produce), a line that
is not JSON, or a line that is not a JSON-RPC message leaves the client waiting forever.
This module replaces it with the same streams (same signature, same fd diversion) and
reads each line itself:

* bytes that are not UTF-8 are replaced with U+FFFD, and the answer carries a warning;
* lone surrogates anywhere in the message (values and keys) are replaced with U+FFFD
  (:func:`~agent_link_core.envelope.sanitize_text`) and the call is processed; its answer
  carries a ``lone_surrogate_replaced`` warning naming each field;
* a line that is not JSON is answered with JSON-RPC ``-32700`` (parse error), a line that is
  not a valid JSON-RPC message with ``-32600`` (invalid request), and a line longer than
  :data:`MAX_LINE_BYTES` with ``-32600`` without being held in memory; each with the
  request's ``id`` when it can be read from the line, else ``null`` (JSON-RPC 2.0 §5.1);
* notifications (no ``id``) that cannot be read are logged, never answered (JSON-RPC 2.0).

Warnings reach a tool result as ``warnings`` entries of its ``structuredContent`` (and of the
JSON text content that mirrors it); any other result gets them under
``_meta["agent-link/warnings"]``.

Why this is not the SDK's transport (issue 31 asks for the SDK's wherever no host behaviour
forces otherwise): hosts pass on what a model wrote, and a model writes lone surrogates; a
host that gets no answer waits for it until its own tool timeout, and the agent with it. The SDK still answers nothing to a line it cannot validate (mcp 2.3.0,
``mcp/server/stdio.py``: ``stdin_reader`` sends the validation exception into the session,
which only logs it), so the replacement stays until the SDK answers such lines itself.
``agent-link mcp`` uses it when the host kit is installed; the core alone uses the SDK's.
plugins/hostkit/tests/test_hostkit_stdio_transport.py holds each case; the bench section ``mcp_start`` times the whole
opening through it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import mcp_types as types
import pydantic
from mcp.server import stdio as sdk_stdio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from agent_link_hostkit import fastfront
from agent_link_core.envelope import sanitize_text

log = logging.getLogger(__name__)

# The largest request line read whole (bytes, newline excluded). A 64 KiB body escaped as
# JSON (\uXXXX for every character) stays far below; anything longer is refused unread.
MAX_LINE_BYTES = 8 * 1024 * 1024
# How long calls under way may still answer once the client has closed its input (seconds): a pipe
# still reads them; a client that left (the MCP stdio shutdown) sends SIGTERM after its own wait.
DRAIN_BOUND_S = 3.0
# How much of the input is read at once (bytes).
READ_CHUNK_BYTES = 1 << 16
# The pipe size asked for the output (bytes; Linux's default pipe-max-size).
PIPE_BYTES = 1 << 20
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
WARNINGS_META_KEY = "agent-link/warnings"

_SURROGATE = re.compile("[\ud800-\udfff]")
# The request id of a line that cannot be parsed: the first "id" member with a number or a
# plain string value. Only used to answer; a wrong guess costs the client nothing.
_ID_GUESS = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"[^"\\\x00-\x1f]{0,200}")')


@dataclass
class LineOutcome:
    """What one input line becomes.

    :param message: the JSON-RPC message to serve, or None.
    :param answer: a JSON-RPC error response to write back at once, or None.
    :param warnings: warning objects (``code``, ``message``, ``details``) for the answer.
    """

    message: types.JSONRPCMessage | None = None
    answer: dict[str, Any] | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)


def guess_id(raw: bytes) -> int | str | None:
    """The request id written in a line that is not valid JSON, or None."""
    match = _ID_GUESS.search(raw)
    if match is None:
        return None
    token = match.group(1)
    return token[1:-1].decode("utf-8", "replace") if token.startswith(b'"') else int(token)


def error_response(request_id: int | str | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response object."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _clean(value: Any, path: str, changed: list[str]) -> Any:
    """``value`` with lone surrogates replaced in every string and key; paths go to ``changed``."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            fixed = sanitize_text(value)
            if fixed != value:
                changed.append(path or "$")
            return fixed
        return value
    if isinstance(value, list):
        return [_clean(item, f"{path}[{i}]", changed) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            clean_key = _clean(key, f"{path}.<key>" if path else "<key>", changed) if isinstance(key, str) else key
            out[clean_key] = _clean(item, f"{path}.{clean_key}" if path else clean_key, changed)
        return out
    return value


def _paths_with(value: Any, char: str, path: str = "") -> list[str]:
    """The paths (as :func:`_clean` names them) of the strings and keys in ``value`` holding ``char``."""
    if isinstance(value, str):
        return [path or "$"] if char in value else []
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _paths_with(item, char, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for key, item in value.items()
                for p in ([f"{path}.<key>" if path else "<key>"] if isinstance(key, str) and char in key else [])
                + _paths_with(item, char, f"{path}.{key}" if path else str(key))]
    return []


def parse_line(raw: bytes, *, too_long: bool = False) -> LineOutcome:
    """Turn one input line (without its newline) into a message to serve or an answer.

    :param raw: the line's bytes; with ``too_long``, only its first bytes.
    :param too_long: the line exceeded :data:`MAX_LINE_BYTES` and was not read whole.
    """
    if too_long:
        return LineOutcome(answer=error_response(
            guess_id(raw[:4096]), INVALID_REQUEST,
            f"Invalid request: a line longer than {MAX_LINE_BYTES} bytes is not read.",
            {"limitBytes": MAX_LINE_BYTES}))
    warnings: list[dict[str, Any]] = []
    replaced = False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text, replaced = raw.decode("utf-8", "replace"), True
    try:
        obj = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and RecursionError-free ValueErrors
        return LineOutcome(answer=error_response(guess_id(raw), PARSE_ERROR, f"Parse error: {exc}"))
    except RecursionError:
        return LineOutcome(answer=error_response(guess_id(raw), PARSE_ERROR, "Parse error: nested too deeply."))
    if not isinstance(obj, dict):
        return LineOutcome(answer=error_response(None, INVALID_REQUEST, "Invalid request: expected one JSON object."))
    if replaced:
        # the fields that hold a replacement now (one that was sent as U+FFFD is named too)
        fields = _paths_with(obj, "\ufffd")
        warnings.append({"code": "invalid_utf8_replaced",
                         "message": "The request held bytes that are not UTF-8; each was read as U+FFFD, in: "
                                    + (", ".join(fields[:20]) or "$") + ".",
                         "details": {"paths": fields[:100]}})
    changed: list[str] = []
    obj = _clean(obj, "", changed)
    if changed:
        warnings.append({"code": "lone_surrogate_replaced",
                         "message": "Lone UTF-16 surrogates were replaced with U+FFFD in: " + ", ".join(changed[:20]) + ".",
                         "details": {"paths": changed[:100]}})
    request_id = obj.get("id")
    try:
        message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except pydantic.ValidationError as exc:
        if "method" not in obj and ("result" in obj or "error" in obj):
            # a response to this server: JSON-RPC has no way to answer it
            log.warning("agent-link: dropped a JSON-RPC line that is not a valid message: %s", type(exc).__name__)
            return LineOutcome()
        # anything else that is no valid message (even without an id: {}, a numeric method) is
        # an invalid request, answered with id null as JSON-RPC 2.0 §5 says
        answer_id = request_id if isinstance(request_id, (int, str)) and not isinstance(request_id, bool) else None
        return LineOutcome(answer=error_response(answer_id, INVALID_REQUEST, f"Invalid request: {_what_is_wrong(obj)}"))
    if "id" in obj and "method" in obj and not isinstance(message, types.JSONRPCRequest):
        # An id of the wrong type (true, 1.5, {}) reads as a notification: still answer it.
        return LineOutcome(answer=error_response(None, INVALID_REQUEST, "Invalid request: id must be a string or an integer."))
    if warnings and not isinstance(message, types.JSONRPCRequest):
        log.warning("agent-link: a JSON-RPC notification or response was read with replacements: %s",
                    [w["code"] for w in warnings])
        warnings = []
    if isinstance(message, types.JSONRPCRequest) and obj.get("method") == "tools/call":
        wrong = _call_params_wrong(obj.get("params") or {})
        if wrong:  # the SDK's own refusal of these says only "Invalid request parameters"
            return LineOutcome(answer=error_response(request_id, INVALID_PARAMS, f"Invalid params: {wrong}"))
    return LineOutcome(message=message, warnings=warnings)


def _call_params_wrong(params: dict[str, Any]) -> str | None:
    """Why ``tools/call`` params cannot name a call (MCP: ``name`` a string, ``arguments`` an
    object when given), or None."""
    if not isinstance(params.get("name"), str):
        return 'tools/call names its tool in "params.name" (a string).'
    if params.get("arguments") is not None and not isinstance(params["arguments"], dict):
        return '"params.arguments" must be an object of the tool\'s arguments.'
    return None


def _what_is_wrong(obj: dict[str, Any]) -> str:
    """Why ``obj`` is not a JSON-RPC 2.0 request, in the protocol's terms (not a validator's)."""
    if obj.get("jsonrpc") != "2.0":
        return 'a JSON-RPC 2.0 request has "jsonrpc": "2.0".'
    if not isinstance(obj.get("method"), str):
        return 'a request names its "method" (a string).'
    if "params" in obj and not isinstance(obj["params"], dict):
        return '"params" must be an object.'
    if not isinstance(obj.get("id"), (int, str)) or isinstance(obj.get("id"), bool):
        return '"id" must be a string or an integer.'
    return "not a JSON-RPC 2.0 request this server can read."


def add_warnings(response: dict[str, Any], warnings: list[dict[str, Any]]) -> dict[str, Any]:
    """``response`` (a JSON-RPC response or error object) with ``warnings`` attached."""
    if "error" in response:
        error = response["error"]
        data = error.get("data")
        if data is None or isinstance(data, dict):
            error["data"] = {**(data or {}), "warnings": warnings}
        return response
    result = response.get("result")
    if not isinstance(result, dict):
        return response
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        old = dict(structured)
        structured["warnings"] = [*(structured.get("warnings") or []), *warnings]
        for item in result.get("content") or []:
            if isinstance(item, dict) and item.get("type") == "text":
                try:
                    mirrors = json.loads(item["text"]) == old
                except (ValueError, TypeError):
                    mirrors = False
                if mirrors:
                    item["text"] = json.dumps(structured, ensure_ascii=False)
        return response
    meta = result.setdefault("_meta", {})
    if isinstance(meta, dict):
        meta[WARNINGS_META_KEY] = warnings
    return response


class _Lines:
    """The lines of the client's input: a pipe or socket read on the event loop when readable
    (no worker thread per request: on a loaded machine that costs more than the call), anything
    else (a file, an in-memory stream) in a worker thread. ``then``: asked when the input ends,
    ``(next fd, bytes already read of it)`` to go on with (the start-up front handing the wire
    over, :meth:`agent_link_hostkit.fastfront.Front.take_input`), or None.
    """

    def __init__(self, stream: BinaryIO, then: Callable[[], tuple[int, bytes] | None] | None = None) -> None:
        self.stream, self.then = stream, then
        self.fd = _pipe_fd(stream, sockets=True) if stream is not getattr(sys.stdin, "buffer", None) else None
        self.buffer = bytearray()
        self.head: bytes | None = None  # the start of a too-long line whose rest is skipped
        self.ended = False

    async def next(self) -> tuple[bytes, bool] | None:
        """The next line (newline stripped; a line over :data:`MAX_LINE_BYTES` as its first
        4096 bytes and True, its rest skipped unread); None at the end of the input."""
        while True:
            end = self.buffer.find(b"\n")
            if self.head is not None:  # skipping the rest of a too-long line
                if end >= 0 or self.ended:
                    del self.buffer[:end + 1 if end >= 0 else len(self.buffer)]
                    head, self.head = self.head, None
                    return head, True
                self.buffer.clear()
            elif end > MAX_LINE_BYTES or (end < 0 and len(self.buffer) > MAX_LINE_BYTES):
                self.head = bytes(self.buffer[:min(4096, MAX_LINE_BYTES + 1)])
                continue
            elif end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[:end + 1]
                return line.rstrip(b"\r"), False
            elif self.ended:
                line, self.buffer = bytes(self.buffer), bytearray()  # the last line, without a newline
                return (line, False) if line else None
            if self.fd is not None:
                await anyio.wait_readable(self.fd)
                chunk = os.read(self.fd, READ_CHUNK_BYTES)
            else:
                read = getattr(self.stream, "read1", self.stream.read)
                chunk = await anyio.to_thread.run_sync(read, READ_CHUNK_BYTES, abandon_on_cancel=True)
            if chunk:
                self.buffer += chunk
                continue
            handed, self.then = (self.then() if self.then is not None else None), None
            self.ended = handed is None
            if handed is not None:
                self.fd, self.buffer = handed[0], self.buffer + handed[1]


def _write(stream: BinaryIO, data: bytes) -> None:
    stream.write(data)
    stream.flush()


def _pipe_fd(stream: BinaryIO, *, sockets: bool = False) -> int | None:
    """The descriptor of ``stream`` when it is a pipe (what hosts and the start-up front give
    the server) or, with ``sockets``, a socket; else None (a file, a terminal, an in-memory
    stream, or a system without ``poll``, such as Windows)."""
    if not hasattr(select, "poll"):
        return None
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
        return fd if stat.S_ISFIFO(mode) or (sockets and stat.S_ISSOCK(mode)) else None
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def _nonblocking(fd: int | None, on: bool = True) -> int | None:
    """Set the pipe ``fd`` non-blocking (``on``) or back; ``fd`` itself (None: nothing done).
    Turning it on also asks for a pipe of :data:`PIPE_BYTES` where the system allows (Linux),
    so a long answer (an inbox read of 30 messages is about 75 KB) goes in one write and the
    client wakes once, not once per 64 KiB of the default pipe."""
    if fd is not None:  # a pipe: a POSIX system, so fcntl is there
        import fcntl

        os.set_blocking(fd, not on)
        if on and hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):  # above the system's pipe-max-size: the default stays
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return fd


async def _write_pipe(fd: int, data: bytes) -> None:
    """Write ``data`` to the pipe ``fd`` (non-blocking: the transport sets it so while it
    serves, as asyncio's own pipe transports do) on the event loop: as much as the pipe takes
    at once, the rest when it has room again (the loop serves other work while a client reads
    slowly). One write per answer that fits, so the client wakes once; no answer, however
    long, waits for a worker thread to be scheduled.

    :raises OSError: as the write would (``BrokenPipeError`` when the client left).
    """
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            await anyio.wait_writable(fd)


@asynccontextmanager
async def stdio_server(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> AsyncIterator[Any]:
    """Serve MCP over the process's stdin and stdout (or the given binary streams).

    Drop-in for ``mcp.server.stdio.stdio_server``: yields ``(read_stream, write_stream)`` of
    ``SessionMessage`` for ``Server.run``. Without explicit streams it claims fd 0 and 1 as
    the SDK does (children read EOF, stray prints go to stderr) and restores them on exit.
    """
    restore: list[Any] = []
    # the start-up front's wire, taken over once the opening is over (claimed streams only)
    front = fastfront.current() if stdin is None and stdout is None else None
    try:
        if stdin is None:
            # The SDK's fd claim (private, mcp 2.x): children read EOF, stray prints miss the wire.
            stdin, release = sdk_stdio._claim_fd(0, sys.stdin, "rb", sdk_stdio._open_stdin_diversion)
            restore.append(release)
        if stdout is None:
            stdout, release = sdk_stdio._claim_fd(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)
            restore.append(release)
        reader_in, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, writer_out = create_context_streams[SessionMessage](0)
        # each answer's bytes with the marks its call left to apply once they are written (registry.AFTER_WRITE)
        lines_in, lines_out = anyio.create_memory_object_stream[tuple[bytes, list[Callable[[], object]] | None]](64)
        pending: dict[int | str, list[dict[str, Any]]] = {}
        after: dict[int | str, list[Callable[[], object]]] = {}  # the marks of each request not answered yet
        unanswered: set[int | str] = set()  # requests the server has not answered yet
        source, sink = stdin, stdout

        answers, out = lines_in.clone(), lines_in.clone()
        lines_in.close()  # the two clones keep the writer open while their tasks run

        lines = _Lines(source)
        if front is not None and lines.fd is not None and _pipe_fd(front.wire_in, sockets=True) is not None:
            # the front stops copying the client's lines after the opening: each later request
            # and answer then crosses no thread (fastfront.Front.take_input / output_free)
            front.taker, lines.then = True, front.take_input
        else:
            front = None

        async def read_lines() -> None:
            from agent_link_core.tools.registry import AFTER_WRITE, INPUT_ENDED

            ended = [False]
            INPUT_ENDED.set(ended)  # in the context each item is sent from: its handler's
            async with reader_in, answers:
                while True:
                    got = await lines.next()
                    if got is None:
                        # A client that closes its input after its last request (a pipe) still
                        # reads the answers: calls under way finish first, within a bound, and
                        # mark no mail read (it may have left: agent_link_core.tools.registry.client_gone).
                        ended[0] = True
                        with anyio.move_on_after(DRAIN_BOUND_S):
                            while unanswered:
                                await anyio.sleep(0.05)
                        return
                    raw, too_long = got
                    if not raw.strip():
                        continue
                    outcome = parse_line(raw, too_long=too_long)
                    if outcome.answer is not None:
                        await answers.send((json.dumps(outcome.answer, ensure_ascii=False).encode("utf-8") + b"\n", None))
                    if outcome.message is None:
                        continue
                    if isinstance(outcome.message, types.JSONRPCNotification) and outcome.message.method == "notifications/cancelled":
                        # a cancelled request gets no answer (MCP): the drain at EOF must not wait for it
                        unanswered.discard(cancelled := (outcome.message.params or {}).get("requestId"))  # type: ignore[arg-type]
                        after.pop(cancelled, None)  # type: ignore[arg-type]
                    if isinstance(outcome.message, types.JSONRPCRequest):
                        unanswered.add(outcome.message.id)
                        AFTER_WRITE.set(after.setdefault(outcome.message.id, []))  # the handler's, as INPUT_ENDED
                        if outcome.warnings:
                            pending[outcome.message.id] = outcome.warnings
                    await reader_in.send(SessionMessage(outcome.message))

        async def encode_responses() -> None:
            async with writer_out, out:
                async for session_message in writer_out:
                    message = session_message.message
                    warnings = marks = None
                    if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None:
                        warnings, marks = pending.pop(message.id, None), after.pop(message.id, None)
                        unanswered.discard(message.id)
                    if warnings:
                        data = add_warnings(message.model_dump(mode="json", by_alias=True, exclude_unset=True), warnings)
                        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                    else:
                        text = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await out.send((text.encode("utf-8") + b"\n", marks))

        async def apply_once_passed(marks: list[Callable[[], object]], line: int) -> None:
            # an answer the front still relays is written once its writer thread is done with its line ``line``
            assert front is not None
            while front.passed < line and not front.drained():
                await anyio.sleep(0.01)
            if front.passed >= line:
                apply(marks)

        def apply(marks: list[Callable[[], object]]) -> None:
            for mark in marks:
                try:
                    mark()
                except Exception:  # e.g. a busy database: the mail shown stays unread, to be shown again
                    log.warning("agent-link: mail an answer showed was not marked read", exc_info=True)

        async def write_lines() -> None:
            to, to_pipe, handing = sink, _nonblocking(_pipe_fd(sink)), front
            relayed = 0  # lines written for the front to relay

            async def put(data: bytes) -> None:
                if to_pipe is not None:
                    await _write_pipe(to_pipe, data)
                else:  # a file, a socket or an in-memory stream: a worker thread may block
                    await anyio.to_thread.run_sync(_write, to, data)

            try:
                async with lines_out:
                    async for data, marks in lines_out:
                        if handing is not None and handing.output_free():
                            await put(fastfront.HANDOVER_MARK)  # the front passes on what came before it, then stops
                            await anyio.to_thread.run_sync(handing.wait_drained)
                            if handing.handed_out.is_set():
                                _nonblocking(to_pipe, False)
                                to, to_pipe = handing.wire_out, _nonblocking(_pipe_fd(handing.wire_out))
                            handing = None
                        await put(data)  # raises when the client is gone: the marks of an answer not written are dropped
                        relayed += handing is not None
                        if marks and handing is not None:
                            tg.start_soon(apply_once_passed, marks, relayed)
                        elif marks:
                            apply(marks)
            finally:
                _nonblocking(to_pipe, False)  # whoever writes to it next expects a blocking pipe

        async with anyio.create_task_group() as tg:
            tg.start_soon(write_lines)
            tg.start_soon(read_lines)
            tg.start_soon(encode_responses)
            yield read_stream, write_stream
    finally:
        for release in reversed(restore):
            if release is not None:
                release()
