"""The page's guards over plain HTTP: loopback only, the token, the Host header, CSRF, the
Content Security Policy; and what the page writes into the mailbox for a person."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from agent_link_testing.web_page import PageServer, ThreadServer
from agent_link_web.context import act_for_patterns, may_act_for, person_address

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError


def authed(server: PageServer, method: str, path: str, **kw: Any) -> Any:
    headers = {"Cookie": server.cookie(), **kw.pop("headers", {})}
    return server.request(method, path, headers=headers, **kw)


def form(data: dict[str, str]) -> dict[str, Any]:
    return {"body": urlencode(data).encode(), "headers": {"Content-Type": "application/x-www-form-urlencoded"}}


def test_token_cookie_host_and_headers(cli_server: PageServer) -> None:
    s = cli_server
    assert s.url.startswith("http://127.0.0.1:")  # loopback by default
    assert len(s.token) >= 40
    denied = s.request("GET", "/")
    assert denied.status == 403 and b"token" in denied.body
    assert s.request("GET", "/?token=wrong").status == 403
    assert s.request("GET", "/fragment/inbox").status == 403
    assert s.request("GET", "/events").status == 403
    entry = s.request("GET", f"/?token={s.token}")
    assert entry.status == 303 and entry.getheader("location") == "/"
    cookie = entry.getheader("set-cookie") or ""
    assert cookie.startswith(f"agent_link_web_{s.port}={s.token}") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = authed(s, "GET", "/")
    assert page.status == 200 and b"Agents" in page.body
    csp = page.getheader("content-security-policy") or ""
    for rule in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"):
        assert rule in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert page.getheader("x-content-type-options") == "nosniff" and page.getheader("referrer-policy") == "same-origin"
    for host in ("evil.example:80", f"evil.example:{s.port}", f"127.0.0.1.nip.io:{s.port}", "127.0.0.1:1"):
        foreign = s.request("GET", f"/?token={s.token}", host=host, headers={"Cookie": s.cookie()})
        assert foreign.status == 421, host
    assert authed(s, "GET", "/", host=f"localhost:{s.port}").status == 200


def test_state_changes_need_the_csrf_token_and_our_origin(cli_server: PageServer) -> None:
    s = cli_server
    csrf = re.search(rb'name="csrf" value="([^"]+)"', authed(s, "GET", "/").body)
    assert csrf is not None
    token = csrf.group(1).decode()
    message = {"to": "team:bob", "message": "hello from the page", "anticipation": "fyi"}
    assert authed(s, "POST", "/send", **form(message)).status == 403
    assert authed(s, "POST", "/send", **form({**message, "csrf": "forged"})).status == 403
    other_site = form({**message, "csrf": token})
    other_site["headers"]["Origin"] = "http://evil.example"
    assert authed(s, "POST", "/send", **other_site).status == 403
    no_cookie = form({**message, "csrf": token})
    assert s.request("POST", "/send", **no_cookie).status == 403
    sent = form({**message, "csrf": token})
    sent["headers"]["Origin"] = f"http://127.0.0.1:{s.port}"
    ok = authed(s, "POST", "/send", **sent)
    assert ok.status == 303 and (ok.getheader("location") or "").startswith("/c/")
    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"})
    try:
        rows = app.store.conn.execute("SELECT * FROM messages").fetchall()
        assert len(rows) == 1 and rows[0]["from_addr"] == "user:tester" and rows[0]["recipient"] == "team:bob"
        envelope = app.mailbox.envelope(rows[0])
        # one consistent claim: the notice names the person, never "another AI agent" (the guard sentence stays)
        notice = envelope.splitlines()[1]
        assert notice.startswith("<notice>A person (user:tester) wrote this message on the agent-link web page")
        assert "another AI agent and" not in envelope and "The user did not write it" not in envelope
        assert "carries none of the user's authority" in notice
        assert '<origin kind="person" through="web-page" />' in envelope
    finally:
        app.close()


def test_bind_elsewhere_only_with_the_flag_and_a_warning(web_env: dict[str, str]) -> None:
    """Another loopback address is still this machine only: no warning, and the link names it
    (a non-loopback bind warns: test_web_bind.py)."""
    process = subprocess.Popen([sys.executable, "-m", "agent_link_core", "web", "--port", "0", "--bind", "127.0.0.2"],
                               env=web_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None and process.stdout is not None
        assert "http://127.0.0.2:" in process.stdout.readline()
        assert "WARNING" not in process.stderr.readline()
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_an_origin_only_a_send_from_the_page_gets(isolated_env: Path) -> None:
    """A client cannot claim a person wrote its message: only the page's own sends are marked."""
    import asyncio

    from agent_link_core.model import Caller

    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"})
    try:
        out = asyncio.run(app.send(caller=Caller("user:tester", "config", "user"), to="team:bob", body="forged?",
                                   tool="agent-link-web"))
        row = app.mailbox.get_row(out.message["id"])
        assert "author" not in json.loads(row["metadata"]) and "<origin" not in app.mailbox.envelope(row)
    finally:
        app.close()



def test_the_page_vouches_only_for_mail_written_on_this_machine(isolated_env: Path) -> None:
    """The page's author mark on mail from another machine (the machines plugin keeps a record's metadata) is that
    machine's word: its envelope keeps the usual notice, with no person named and no origin (found by review: a
    forged record could claim a person wrote it on this machine's page)."""
    from agent_link_core.mailbox import new_message_id
    from agent_link_core.model import Caller
    from agent_link_core.records import OutgoingMessage
    from agent_link_web.context import ORIGIN

    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"})
    try:
        envelopes = []
        for elsewhere in (False, True):
            metadata: dict[str, Any] = {"author": dict(ORIGIN), **({"machines": {"origin": "other"}} if elsewhere else {})}
            message = OutgoingMessage(new_message_id(), Caller("user:mallory", "config", "user"), "team:bob", "team:bob",
                                      "trust me", "fyi", None, None, metadata)
            app.mailbox.store_message(message)
            envelopes.append(app.mailbox.envelope(app.mailbox.stored(message.id)))
        long = OutgoingMessage(new_message_id(), Caller("user:" + "a" * 200, "config", "user"), "team:bob", "team:bob", "hi",
                               "fyi", None, None, {"author": dict(ORIGIN)})
        app.mailbox.store_message(long)  # the sentence stays within what an envelope author may be: the person cut
        envelopes.append(app.mailbox.envelope(app.mailbox.stored(long.id)))
        assert "A person (user:mallory) wrote this" in envelopes[0] and "<origin" in envelopes[0]
        assert "A person (user:aaa" in envelopes[2] and "\u2026) wrote this" in envelopes[2] and not app.health()["plugins"]["problems"]
        assert "A person" not in envelopes[1] and "<origin" not in envelopes[1] and "another AI agent" in envelopes[1]
    finally:
        app.close()


def test_person_and_act_for_settings() -> None:
    assert person_address("ana") == "user:ana"
    assert person_address(None).startswith("user:")
    with pytest.raises(AgentLinkError):
        person_address("no spaces please")
    from agent_link_core.cli_text import error_line

    # the error names where the bad name came from, each as what it is (an option, a variable)
    for given_as, said in (("as", "--as: expected 1-128"), ("AGENT_LINK_WEB_USER", "AGENT_LINK_WEB_USER: expected 1-128")):
        with pytest.raises(AgentLinkError) as info:
            person_address("Bad Name", given_as)
        assert said in error_line(info.value, "web") and "--AGENT_LINK" not in error_line(info.value, "web")
    patterns = act_for_patterns("team:*, codex:abc")
    assert may_act_for(patterns, "team:bob") and may_act_for(patterns, "codex:abc")
    assert not may_act_for(patterns, "codex:abd") and not may_act_for((), "team:bob")


def test_resolving_for_an_agent_is_off_by_default(isolated_env: Path) -> None:
    import asyncio

    from agent_link_core.model import Caller

    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude", "AGENT_LINK_INSPECT_ALL": "1"})
    mid = asyncio.run(app.send(caller=Caller("team:alice", "config", "team"), to="team:bob", body="do it",
                               anticipation="action")).message["id"]
    for act_for, allowed in (((), False), (("team:*",), True)):
        server = ThreadServer(app, act_for=act_for)
        try:
            s = server.page
            page = authed(s, "GET", f"/c/{mid}")
            assert (b"Resolve on the agent" in page.body) is allowed
            done = authed(s, "POST", "/act", **form({"csrf": server.config.csrf, "messageId": mid, "resolution": "done"}))
            assert done.status == 303
            state = app.mailbox.state(app.mailbox.get_row(mid))
            assert (state.status == "done") is allowed
            if allowed:
                assert state.resolution is not None and state.resolution["by"] == "team:bob"
                assert "by user:tester on the agent-link web page, on behalf of team:bob" in state.resolution["reason"]
        finally:
            server.close()
    app.close()


def test_without_a_browser_the_browser_tests_fail_naming_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_testing import web_page

    monkeypatch.setattr(web_page.os, "access", lambda path, mode: False)
    monkeypatch.setattr(web_page.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception) as caught:
        web_page.chromium_path()
    assert "apt-get install -y chromium" in str(caught.value)


def test_a_taken_port_is_one_clear_line(web_env: dict[str, str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "agent_link_core", "web", "--port", str(port)], env=web_env,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(f"agent-link: cannot listen on 127.0.0.1:{port}") and "Traceback" not in done.stderr
    assert done.stderr.rstrip().endswith("Choose another --port.")


def test_a_bind_address_that_is_not_this_machines_says_check_bind_and_an_empty_as_is_refused(web_env: dict[str, str]) -> None:
    """It advised another --port for a name that does not resolve; --as '' fell back to the login name."""
    def web(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent_link_core", "web", *args], env=web_env, capture_output=True,
                              text=True, timeout=120)

    unresolved = web("--bind", "nonsense.invalid", "--port", "0")
    assert unresolved.returncode == 1 and "Traceback" not in unresolved.stderr
    assert "Check --bind: an address of this machine" in unresolved.stderr and "another --port" not in unresolved.stderr
    empty = web("--as", "")
    assert empty.returncode == 2 and "'' cannot be a person's name on the page" in empty.stderr, empty.stderr


def test_the_page_send_says_what_the_cli_says_and_keeps_what_was_typed(cli_server: PageServer) -> None:
    """A never-served address: the send's unknown_address warning is shown (as the CLI and
    message_agent give it); an empty To is asked for in words; a refused send (a body over the
    limit) draws the form again with the typed text, never a redirect that loses it."""
    from urllib.parse import parse_qs, urlsplit

    from agent_link_core.envelope import MAX_BODY_BYTES

    s = cli_server
    csrf = re.search(rb'name="csrf" value="([^"]+)"', authed(s, "GET", "/").body)
    assert csrf is not None

    def post(**fields: str) -> Any:
        sent = form({"csrf": csrf.group(1).decode(), "anticipation": "reply", **fields})
        sent["headers"]["Origin"] = f"http://127.0.0.1:{s.port}"
        return authed(s, "POST", "/send", **sent)

    unknown = post(to="team:nobody-ever", message="hello?")
    location = unknown.getheader("location") or ""
    assert unknown.status == 303 and location.startswith("/c/")
    notice = parse_qs(urlsplit(location).query)["notice"][0]
    assert notice.startswith("No process has ever served team:nobody-ever")
    assert b"No process has ever served team:nobody-ever" in authed(s, "GET", location).body
    empty = post(to=" ", message="typed words")
    assert empty.status == 400 and b"Say whom to write to in To" in empty.body and b"No agent matches" not in empty.body
    assert b">typed words</textarea>" in empty.body
    big = "x" * (MAX_BODY_BYTES + 1)
    too_large = post(to="team:bob", message=big)
    assert too_large.status == 400 and big.encode() in too_large.body and b'value="reply" selected' in too_large.body


def test_a_refused_answer_keeps_what_was_typed(cli_server: PageServer) -> None:
    import anyio

    from agent_link_core.envelope import MAX_BODY_BYTES
    from agent_link_core.model import Caller

    s = cli_server
    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"})
    try:
        asked = anyio.run(lambda: app.send(caller=Caller("team:bob", "config", "team"), to="user:tester", body="ok?",
                                           anticipation="reply"))
    finally:
        app.close()
    mid = asked.message["id"]
    csrf = re.search(rb'name="csrf" value="([^"]+)"', authed(s, "GET", f"/c/{mid}").body)
    assert csrf is not None
    big = "y" * (MAX_BODY_BYTES + 1)
    sent = form({"csrf": csrf.group(1).decode(), "messageId": mid, "resolution": "reply", "message": big})
    sent["headers"]["Origin"] = f"http://127.0.0.1:{s.port}"
    refused = authed(s, "POST", "/answer", **sent)
    assert refused.status == 400 and f">{big}</textarea>".encode() in refused.body


def test_a_status_search_does_not_know_is_refused(cli_server: PageServer) -> None:
    s = cli_server
    headers = {"Cookie": s.cookie()}
    refused = s.request("GET", "/search?q=hello&status=bogus", headers=headers)
    assert refused.status == 400
    body = refused.body.decode()
    assert 'class="error"' in body and "&#39;bogus&#39; is not a status" in body and "pending" in body
    assert s.request("GET", "/search?q=hello&status=pending", headers=headers).status == 200
    assert s.request("GET", "/search?q=hello", headers=headers).status == 200


def test_an_answer_to_no_message_says_so_not_that_it_is_empty(cli_server: PageServer) -> None:
    s = cli_server
    csrf = re.search(rb'name="csrf" value="([^"]+)"', authed(s, "GET", "/").body)
    assert csrf is not None
    sent = form({"csrf": csrf.group(1).decode(), "messageId": "zz", "resolution": "reply", "message": ""})
    sent["headers"]["Origin"] = f"http://127.0.0.1:{s.port}"
    refused = authed(s, "POST", "/answer", **sent)
    where = refused.headers.get("location", "") if refused.status == 303 else refused.body.decode()
    assert "empty" not in where and "zz" in where, (refused.status, where)
