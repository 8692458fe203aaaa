"""Text outside ASCII reaches the mailbox and the page as typed, through the real server:
a form body or query string in raw UTF-8 (a script, ``curl --data``) as much as the
``%XX``-escaped UTF-8 a browser sends; bytes that are not UTF-8 are refused, naming the field."""

from __future__ import annotations

import os
import re
import socket
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import pytest
from agent_link_testing.web_page import PageServer

from agent_link_core.app import App
from agent_link_core.model import Caller

TEXT = "café, 日本語, 🎉 — naïve"


def raw_request(server: PageServer, method: str, target: bytes, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request with ``target`` (path and query) sent byte for byte, as a script may
    send it (http.client refuses bytes outside ASCII there); returns status, headers, body."""
    head = {"Host": f"127.0.0.1:{server.port}", "Cookie": server.cookie(), "Connection": "close",
            "Content-Length": str(len(body)), **(headers or {})}
    lines = b"".join(f"{k}: {v}\r\n".encode() for k, v in head.items())
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(method.encode() + b" " + target + b" HTTP/1.1\r\n" + lines + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    top, _, content = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    found = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    if found.get("transfer-encoding") == "chunked":
        content = _unchunk(content)
    return int(status_line.split()[1]), found, content


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2:]
    return out


def csrf_of(server: PageServer, path: str = "/") -> str:
    _, _, page = raw_request(server, "GET", path.encode())
    found = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1).decode()


def form_body(fields: dict[str, str], *, raw: bool) -> bytes:
    """``fields`` urlencoded: escaped as a browser does, or with the text's UTF-8 bytes left raw."""
    if not raw:
        return urlencode(fields).encode()
    return "&".join(f"{quote(k)}={quote(v, safe=':, ')}".replace(" ", "+") if v.isascii() else f"{k}={v}"
                    for k, v in fields.items()).encode()


def stored_bodies() -> list[str]:
    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"})
    try:
        return [row["body"] for row in app.store.conn.execute("SELECT body FROM messages ORDER BY sent_at")]
    finally:
        app.close()


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("raw", [True, False], ids=["raw-utf8", "escaped"])
def test_a_sent_and_answered_message_keeps_its_text(cli_server: PageServer, raw: bool) -> None:
    csrf = csrf_of(cli_server)
    body = form_body({"csrf": csrf, "to": "team:bob", "message": TEXT, "anticipation": "reply"}, raw=raw)
    assert raw == (not body.isascii())
    status, headers, _ = raw_request(cli_server, "POST", b"/send", body, FORM)
    assert status == 303, headers
    assert stored_bodies() == [TEXT]
    _, _, page = raw_request(cli_server, "GET", headers["location"].encode())
    assert TEXT.encode() in page

    # the answer form, to a question from an agent
    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"})
    try:
        asked = anyio.run(lambda: app.send(caller=Caller("team:bob", "config", "team"), to="user:tester", body="ok?",
                                           anticipation="reply"))
    finally:
        app.close()
    answer = form_body({"csrf": csrf, "messageId": asked.message["id"], "resolution": "reply", "message": TEXT[::-1]}, raw=raw)
    status, headers, _ = raw_request(cli_server, "POST", b"/answer", answer, FORM)
    assert status == 303 and "error" not in headers["location"], headers
    assert stored_bodies() == [TEXT, "ok?", TEXT[::-1]]


@pytest.mark.parametrize("fields", [
    b"to=team:bob&anticipation=fyi&message=%FF%FE",  # escaped bytes that are not UTF-8
    b"to=team:bob&anticipation=fyi&message=caf\xe9 ok",  # raw Latin-1
    b"to=team%FF&anticipation=fyi&message=hello",  # the To field too
], ids=["escaped", "raw-latin1", "to-field"])
def test_a_form_body_that_is_not_utf8_is_refused(cli_server: PageServer, fields: bytes) -> None:
    """As the CLI refuses such text (not stored as U+FFFD): the page says which field, nothing is sent."""
    body = f"csrf={csrf_of(cli_server)}&".encode() + fields
    status, _, page = raw_request(cli_server, "POST", b"/send", body, FORM)
    assert status == 400 and b"is not valid UTF-8" in page and (b"To" if b"to=team%FF" in fields else b"message") in page
    assert stored_bodies() == []
    # a multipart part is read the same way (Starlette alone would read it as Latin-1)
    multi = (b"--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n" + csrf_of(cli_server).encode()
             + b"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"to\"\r\n\r\nteam:bob\r\n--XyZ\r\n"
             b"Content-Disposition: form-data; name=\"message\"\r\n\r\ncaf\xe9\r\n--XyZ--\r\n")
    status, _, page = raw_request(cli_server, "POST", b"/send", multi, {"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert status == 400 and b"The text of message is not valid UTF-8" in page.replace(b"the text", b"The text")
    assert stored_bodies() == []


def test_oversize_and_empty_forms_are_refused_in_the_pages_words(cli_server: PageServer) -> None:
    """Not Starlette's "Field exceeded maximum size of 1024KB." nor the tool's "Invalid arguments: message."."""
    csrf = csrf_of(cli_server)
    huge = urlencode({"csrf": csrf, "to": "team:bob", "message": "x" * 3_000_000}).encode()
    status, _, page = raw_request(cli_server, "POST", b"/send", huge, FORM)
    assert status == 413 and b"at most 65536 bytes" in page and b"KB" not in page
    over = urlencode({"csrf": csrf, "to": "team:bob", "message": "x" * 65537}).encode()
    status, _, page = raw_request(cli_server, "POST", b"/send", over, FORM)
    assert status == 400 and b"65537 bytes" in page and b"at most 65536" in page
    status, _, page = raw_request(cli_server, "POST", b"/send", urlencode({"csrf": csrf, "to": "team:bob", "message": " "}).encode(), FORM)
    assert status == 400 and b"it is empty" in page and b"Invalid arguments" not in page
    assert stored_bodies() == []


def test_query_strings_keep_their_text(cli_server: PageServer) -> None:
    def target(path: str, **params: str) -> bytes:
        return (path + "?" + "&".join(f"{k}={quote(v)}" for k, v in params.items())).encode()

    # the search box and the overview's To field show what the query said
    status, _, page = raw_request(cli_server, "GET", target("/search", q="日本語"))
    assert status == 200 and 'value="日本語"'.encode() in page
    status, _, page = raw_request(cli_server, "GET", target("/", to="café"))
    assert status == 200 and 'value="café"'.encode() in page
    # the token's redirect keeps the rest of the query
    status, headers, _ = raw_request(cli_server, "GET", target("/", token=cli_server.token, to="café"))
    assert status == 303 and headers["location"] == "/?to=caf%C3%A9"
    # raw UTF-8 in the request line never reaches the page: the HTTP server refuses it
    assert raw_request(cli_server, "GET", "/search?q=日本語".encode())[0] == 400


def test_a_multipart_form_is_read_as_its_parts_say(cli_server: PageServer) -> None:
    """Escaping is for urlencoded bodies only: a multipart part keeps its raw UTF-8."""
    csrf = csrf_of(cli_server)
    parts: list[Any] = [("csrf", csrf), ("to", "team:bob"), ("anticipation", "fyi"), ("message", TEXT)]
    body = b"".join(b"--XyZ\r\nContent-Disposition: form-data; name=\"" + k.encode() + b"\"\r\n\r\n" + v.encode() + b"\r\n"
                    for k, v in parts) + b"--XyZ--\r\n"
    status, headers, _ = raw_request(cli_server, "POST", b"/send", body, {"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert status == 303, headers
    assert stored_bodies() == [TEXT]
