"""Malformed input never hangs a client: ``agent_link_hostkit.stdio_transport``.

Unit tests of the line parser, then a fuzz run against a real ``agent-link mcp`` subprocess
over raw stdio: every request line (bad UTF-8, bad JSON, huge lines, lone surrogates,
invalid JSON-RPC) is answered under its id, and the server keeps serving afterwards.
"""

from __future__ import annotations

import importlib.metadata
import json
import random
import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest
from agent_link_testing.mcp_client import RawMcpClient, raw_mcp_server, server_env

from agent_link_hostkit import stdio_transport
from agent_link_hostkit.stdio_transport import (
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    PARSE_ERROR,
    add_warnings,
    guess_id,
    parse_line,
)

ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))


def call_line(request_id: Any, arguments: bytes, name: bytes = b"message_agent") -> bytes:
    return (b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"method":"tools/call",'
            b'"params":{"name":"' + name + b'","arguments":' + arguments + b"}}")


# -- the parser ----------------------------------------------------------------------------


def test_lone_surrogate_is_replaced_and_named() -> None:
    out = parse_line(call_line(7, b'{"to":"test:bob","message":"a \\ud800 b","\\udc00k":1}'))
    assert isinstance(out.message, types.JSONRPCRequest) and out.answer is None
    args = out.message.params["arguments"]  # type: ignore[index]
    assert args["message"] == "a \ufffd b" and "\ufffdk" in args
    [warning] = out.warnings
    assert warning["code"] == "lone_surrogate_replaced"
    assert warning["details"]["paths"] == ["params.arguments.message", "params.arguments.<key>"]


def test_a_surrogate_pair_is_kept() -> None:
    out = parse_line(call_line(1, b'{"message":"\\ud83d\\ude00"}'))
    assert out.warnings == [] and out.message.params["arguments"]["message"] == "\U0001F600"  # type: ignore[union-attr,index]


def test_invalid_utf8_is_replaced_with_a_warning() -> None:
    out = parse_line(call_line(2, b'{"message":"x \xff\xfe y"}'))
    assert out.message is not None and [w["code"] for w in out.warnings] == ["invalid_utf8_replaced"]
    assert out.warnings[0]["details"]["paths"] == ["params.arguments.message"]


@pytest.mark.parametrize(("line", "code", "answer_id"), [
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{', PARSE_ERROR, 9),
    (b'{"jsonrpc":"2.0","id":"abc","method":', PARSE_ERROR, "abc"),
    (b"not json at all", PARSE_ERROR, None),
    (b"[1,2,3]", INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":4,"method":17}', INVALID_REQUEST, 4),
    (b'{"jsonrpc":"1.0","id":5,"method":"tools/list"}', INVALID_REQUEST, 5),
    (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', INVALID_REQUEST, None),
    (b"[" * 100_000, PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":13}', INVALID_REQUEST, 13),
    (b'{"jsonrpc":"2.0","id":15,"method":"tools/list","params":"str"}', INVALID_REQUEST, 15),
])
def test_unreadable_requests_are_answered(line: bytes, code: int, answer_id: Any) -> None:
    out = parse_line(line)
    assert out.message is None and out.answer is not None
    assert out.answer["id"] == answer_id and out.answer["error"]["code"] == code


@pytest.mark.parametrize("line", [b'{"jsonrpc":"2.0","method":42}', b"{}", b'{"foo":1}', b'{"jsonrpc":"2.0"}',
                                  b'{"jsonrpc":"2.0","method":"notifications/x","params":5}'])
def test_invalid_requests_without_an_id_are_answered_with_id_null(line: bytes) -> None:
    """JSON-RPC 2.0 §5: an invalid Request gets an error whose id is null when none can be read."""
    out = parse_line(line)
    assert out.message is None and out.answer is not None
    assert out.answer["id"] is None and out.answer["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize(("params", "says"), [
    (b'{"name":5,"arguments":{}}', '"params.name"'),
    (b'{"arguments":{}}', '"params.name"'),
    (b'{"name":"list_agents","arguments":[1]}', '"params.arguments"'),
    (b'{"name":"list_agents","arguments":"x"}', '"params.arguments"'),
])
def test_tool_calls_that_name_no_call_say_what_is_wrong(params: bytes, says: str) -> None:
    out = parse_line(b'{"jsonrpc":"2.0","id":21,"method":"tools/call","params":' + params + b"}")
    assert out.message is None and out.answer is not None and out.answer["id"] == 21
    assert out.answer["error"]["code"] == -32602 and says in out.answer["error"]["message"]


def test_an_invalid_response_to_this_server_is_not_answered() -> None:
    out = parse_line(b'{"jsonrpc":"2.0","result":{},"id":{"not":"an id"}}')
    assert out.message is None and out.answer is None


def test_too_long_line_answers_with_its_id() -> None:
    out = parse_line(b'{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"x":"', too_long=True)
    assert out.answer is not None and out.answer["id"] == 31 and out.answer["error"]["code"] == INVALID_REQUEST
    assert out.answer["error"]["data"] == {"limitBytes": MAX_LINE_BYTES}


def test_guess_id_ignores_what_is_not_an_id() -> None:
    assert guess_id(b'{"id": 12, "x"') == 12
    assert guess_id(b'{"id": 1.5') is None
    assert guess_id(b'{"identity": 3') is None


def test_warnings_reach_structured_content_and_its_text_mirror() -> None:
    body = {"ok": True, "messageId": "x"}
    response = {"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": json.dumps(body)}], "structuredContent": dict(body), "isError": False}}
    warning = {"code": "lone_surrogate_replaced", "message": "m"}
    out = add_warnings(response, [warning])
    assert out["result"]["structuredContent"]["warnings"] == [warning]
    assert json.loads(out["result"]["content"][0]["text"]) == out["result"]["structuredContent"]
    other = add_warnings({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}, [warning])
    assert other["result"]["_meta"][stdio_transport.WARNINGS_META_KEY] == [warning]
    error = add_warnings({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "m"}}, [warning])
    assert error["error"]["data"] == {"warnings": [warning]}


# -- a real server, raw stdio ------------------------------------------------------------


def raw_server(address: str) -> AbstractAsyncContextManager[RawMcpClient]:
    return raw_mcp_server({"AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, "AGENT_LINK_ADDRESS": address})


def fuzz_lines(seed: int, count: int) -> list[tuple[int, bytes]]:
    """``count`` malformed request lines, each carrying its id where a line can."""
    rng = random.Random(seed)
    lines: list[tuple[int, bytes]] = []
    for i in range(count):
        request_id = 1000 + i
        kind = rng.choice(["surrogate", "utf8", "truncated", "garbage_tail", "bad_method", "bad_params", "deep"])
        if kind == "surrogate":
            unit = rng.choice([b"\\ud800", b"\\udfff", b"\\udc00\\ud800", b"\\ud83d"])
            line = call_line(request_id, b'{"to":"test:bob","message":"s' + unit + b'"}')
        elif kind == "utf8":
            junk = bytes(rng.choice([0x80, 0xC0, 0xED, 0xF5, 0xFF]) for _ in range(rng.randint(1, 5)))
            line = call_line(request_id, b'{"to":"test:bob","message":"u' + junk + b'"}')
        elif kind == "truncated":
            full = call_line(request_id, b'{"to":"test:bob","message":"t"}')
            line = full[: rng.randint(len(b'{"jsonrpc":"2.0","id":1000,'), len(full) - 1)]
        elif kind == "garbage_tail":
            line = call_line(request_id, b'{"to":"test:bob","message":"g"}') + b"}}" + bytes([rng.randint(0, 255)])
            line = line.replace(b"\n", b" ")
        elif kind == "bad_method":
            line = b'{"jsonrpc":"2.0","id":' + str(request_id).encode() + b',"method":["x"]}'
        elif kind == "bad_params":
            line = b'{"jsonrpc":"2.0","id":' + str(request_id).encode() + b',"method":"tools/call","params":"nope"}'
        else:
            line = b'{"jsonrpc":"2.0","id":' + str(request_id).encode() + b',"method":"tools/call","params":' + b"[" * 50_000
        lines.append((request_id, line))
    return lines


@pytest.mark.anyio
@pytest.mark.timeout(180)
async def test_every_malformed_request_line_is_answered_and_the_server_keeps_serving() -> None:
    async with raw_server("test:mallory") as raw:
        lines = fuzz_lines(seed=18, count=60)
        for _, line in lines:
            await raw.send(line)
        # Garbage with no id at all, a huge line with its id up front, and blank lines.
        await raw.send(b"\xff\xfe\x00 not json")
        await raw.send(b"")
        await raw.send(b'{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"x","arguments":{"m":"'
                       + b"a" * (MAX_LINE_BYTES + 10) + b'"}}}')
        await raw.send(b'{"jsonrpc":"2.0","id":78,"method":"tools/list"}')
        answered = await raw.responses({i for i, _ in lines} | {77, 78})
        assert answered[77]["error"]["code"] == INVALID_REQUEST
        assert answered[78]["result"]["tools"], answered[78]
        assert len(raw.null_answers) == 1 and raw.null_answers[0]["error"]["code"] == PARSE_ERROR
        for request_id, line in lines:
            answer = answered[request_id]
            if b"\\ud" in line and b'"to"' in line:  # a readable call with a surrogate: processed, warned
                result = answer["result"]["structuredContent"]
                assert result["ok"] is True, result
                assert "lone_surrogate_replaced" in {w["code"] for w in result["warnings"]}
                assert json.loads(answer["result"]["content"][0]["text"]) == result
        # Still serving: a normal call after all of it.
        await raw.send(call_line(99, b"{}", name=b"agent_link_health"))
        assert (await raw.responses({99}))[99]["result"]["structuredContent"]["ok"] is True


@pytest.mark.anyio
async def test_a_malformed_opening_request_gets_one_answer_also_from_the_start_up_cache() -> None:
    """The second server starts with the start-up cache (agent_link_hostkit.fastfront) warm: it
    must not answer a request the full server refuses, so each gets exactly one answer."""
    for _ in range(2):
        async with raw_server("test:mallory") as raw:
            await raw.send(b'{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}')
            await raw.send(b'{"jsonrpc":"1.0","id":14,"method":"tools/list"}')
            await raw.send(b'{"jsonrpc":"2.0","id":15,"method":"tools/list","params":"str"}')
            await raw.send(b'{"jsonrpc":"2.0","id":13}')
            await raw.send(b'{"jsonrpc":"2.0","id":16,"method":"tools/list"}')
            answered = await raw.responses({13, 14, 15, 16})
            assert all(answered[i]["error"]["code"] == INVALID_REQUEST for i in (13, 14, 15)), answered
            assert "validation error" not in json.dumps(answered)
            assert answered[16]["result"]["tools"]
            assert [a["error"]["code"] for a in raw.null_answers] == [INVALID_REQUEST]


def test_calls_under_way_are_answered_after_the_client_closes_its_input() -> None:
    """A client that writes its requests and closes stdin (a pipe) still gets the answers of calls
    that end within stdio_transport.DRAIN_BOUND_S: here a
    send that waits for a reply (which never comes) until its timeout."""
    import subprocess

    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "message_agent", "arguments": {
        "to": "team:bob", "message": "piped", "waitForReply": True, "timeoutMs": 500}}}
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "mcp"], check=False, capture_output=True, timeout=120,
                          input=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
                          env=server_env({"AGENT_LINK_LOAD_PLUGINS": "waits", "AGENT_LINK_ADDRESS": "team:alice"}))  # waitForReply: plugins/waits
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines()) if "id" in a}
    result = answers[1]["result"]["structuredContent"]
    assert result["ok"] is True and result["messageId"], answers[1]


@pytest.mark.anyio
async def test_answers_go_to_a_pipe_on_the_event_loop_without_blocking_it() -> None:
    """An answer goes into a (non-blocking) pipe at once when it fits; a full pipe (a client
    that stops reading) makes the write wait while the loop goes on; it ends once the client
    reads, with every byte in order. The pipe is left blocking again."""
    import io
    import os
    import select

    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(os.dup(write_fd), "wb") as sink:
            assert stdio_transport._pipe_fd(sink) is not None
        assert stdio_transport._nonblocking(write_fd) == write_fd and not os.get_blocking(write_fd)
        await stdio_transport._write_pipe(write_fd, b'{"id":1}\n')
        assert os.read(read_fd, 100) == b'{"id":1}\n'
        data = bytes(range(256)) * 8192  # 2 MiB: more than the pipe holds, even enlarged
        ticks = 0
        got = bytearray()
        async with anyio.create_task_group() as tg:
            tg.start_soon(stdio_transport._write_pipe, write_fd, data)
            while ticks < 5:  # the loop still runs while the write waits for room
                await anyio.sleep(0.01)
                ticks += 1
            assert select.select([], [write_fd], [], 0)[1] == []  # the pipe is full
            os.set_blocking(read_fd, False)
            while len(got) < len(data):
                try:
                    got += os.read(read_fd, 1 << 16)
                except BlockingIOError:
                    await anyio.sleep(0.001)
        assert bytes(got) == data
        stdio_transport._nonblocking(write_fd, False)
        assert os.get_blocking(write_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert stdio_transport._pipe_fd(io.BytesIO()) is None and stdio_transport._nonblocking(None) is None


@pytest.mark.anyio
async def test_a_pipe_is_read_on_the_event_loop_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe (read on the event loop) and an in-memory stream (read in a worker thread) give
    the same lines: a line over the limit as its head and True, the last line without its
    newline; at the end of the pipe the reader goes on with the fd and bytes ``then`` hands
    over (the start-up front's wire)."""
    import io
    import os

    monkeypatch.setattr(stdio_transport, "MAX_LINE_BYTES", 100)
    data = b'{"a":1}\r\n\n' + b"x" * 150 + b"\n" + b"y" * 5000 + b'\n{"b":2}\n'
    first_r, first_w = os.pipe()
    second_r, second_w = os.pipe()
    os.write(first_w, data)
    os.close(first_w)
    os.write(second_w, b'2}\n{"d":')
    os.close(second_w)

    async def read_all(lines: Any) -> list[tuple[bytes, bool]]:
        got = []
        while (line := await lines.next()) is not None:
            got.append(line)
        return got

    with os.fdopen(first_r, "rb", buffering=0) as first, os.fdopen(second_r, "rb") as second:
        piped = await read_all(stdio_transport._Lines(first, then=lambda: (second.fileno(), b'{"c":')))
    assert piped == [(b'{"a":1}', False), (b"", False), (b"x" * 101, True), (b"y" * 101, True), (b'{"b":2}', False),
                     (b'{"c":2}', False), (b'{"d":', False)]
    assert await read_all(stdio_transport._Lines(io.BytesIO(data))) == piped[:5]
