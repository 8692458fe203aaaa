"""The page's person reads under the one rule of every read path: their own mail, everyone's
only with AGENT_LINK_INSPECT_ALL. A third party's walk over every route of the page (pages,
live sections, panels, the live event stream, the form endpoints) finds nothing of others'
mail (issue reproduction)."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from agent_link_testing import third_party
from agent_link_testing.third_party import ALICE, SECRETS
from agent_link_testing.web_page import ThreadServer, read_url, run_in_thread

from agent_link_core.app import App
from agent_link_web import server as web_server
from agent_link_web.panels import panels

PERSON = "user:tester"
STREAM_BOUND_S = 60.0  # a bound for a stuck stream, never a speed expectation


async def mail_between_alice_and_bob(app: App) -> dict[str, str]:
    """Mail the page's person must not see, plus one open message of bob's and one from alice
    to the person, which they do see."""
    ids = await third_party.mail_between_alice_and_bob(app)
    ids["open"] = (await app.send(caller=ALICE, to="test:bob", body="SECRET-BODY-alpha open", anticipation="action")).message["id"]
    ids["mine"] = (await app.send(caller=ALICE, to=PERSON, body="for the person", anticipation="reply")).message["id"]
    return ids


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def make_server(inspect_all: bool) -> tuple[App, ThreadServer, dict[str, str]]:
    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude"}
    if inspect_all:
        env["AGENT_LINK_INSPECT_ALL"] = "1"
    app = App.create(env)
    ids = run_in_thread(lambda: mail_between_alice_and_bob(app))
    return app, ThreadServer(app, act_for=("test:*",)), ids


@pytest.fixture
def own_page(isolated_env: Path) -> Iterator[tuple[App, ThreadServer, dict[str, str]]]:
    """A page for user:tester without AGENT_LINK_INSPECT_ALL, over mail between alice and bob."""
    app, server, ids = make_server(inspect_all=False)
    try:
        yield app, server, ids
    finally:
        server.close()
        app.close()


def get(server: ThreadServer, path: str) -> tuple[int, str]:
    response = server.page.request("GET", path, headers={"Cookie": server.page.cookie()})
    return response.status, response.body.decode("utf-8", "replace")  # type: ignore[attr-defined]


def post(server: ThreadServer, path: str, data: dict[str, str]) -> tuple[int, str]:
    body = urlencode({**data, "csrf": server.config.csrf}).encode()
    response = server.page.request("POST", path, body=body, headers={
        "Cookie": server.page.cookie(), "Content-Type": "application/x-www-form-urlencoded"})
    return response.status, (response.getheader("location") or "") + response.body.decode("utf-8", "replace")  # type: ignore[attr-defined]


def routes(app: App, ids: dict[str, str]) -> list[str]:
    """Every GET route of the page, aimed at alice's and bob's mail."""
    paths = ["/", "/fragment/agents", "/fragment/inbox", "/fragment/waiting", "/fragment/conversations"]
    paths += [f"/fragment/panel/{p.name}" for p in panels(app)]
    for query in ("SECRET", "alpha", "beta", "gamma", "delta", "eps", "test", "SECRET*"):
        paths += [f"/search?{urlencode({'q': query})}", f"/search?{urlencode({'q': query, 'from': 'test:alice'})}",
                  f"/search?{urlencode({'q': query, 'to': 'test:bob', 'status': 'replied'})}"]
    for key, message_id in ids.items():
        if key != "mine":
            paths += [f"/c/{message_id}", f"/m/{message_id}", f"/fragment/c/{message_id}", f"/c/{message_id.lower()}"]
    return paths


WALKED = {"/", "/c/{message_id:str}", "/m/{message_id:str}", "/search", "/fragment/c/{message_id:str}", "/fragment/panel/{name:str}",
          "/fragment/{name:str}", "/send", "/answer", "/act", "/panel-action",
          "/events",  # test_the_live_stream_announces_only_the_persons_own_changes
          "/static"}  # the script and the style sheet: no mail


def test_a_person_without_inspect_all_reads_only_their_own_mail_on_every_route(own_page: Any) -> None:
    app, server, ids = own_page
    from agent_link_web.server import build_web_app

    guard = build_web_app(app, server.config)
    routes_served = {getattr(r, "path", "") for r in guard.inner.routes}  # type: ignore[attr-defined]
    assert routes_served == WALKED, f"walk the new routes as a third party too: {sorted(routes_served - WALKED)}"
    assert {p.name for p in panels(app)} >= {"receipts"}, "walk the receipts panel too"
    for path in routes(app, ids):
        status, text = get(server, path)
        assert not leaks(text), (path, leaks(text))
    status, overview = get(server, "/")
    assert status == 200 and "for the person" in overview and 'id="scope" class="scope own"' in overview
    status, text = get(server, f"/c/{ids['replied']}")
    assert status == 403 and "sender or the recipient" in text
    # who waits on whom is mail too: bob's open action from alice is not the person's to see
    status, text = get(server, "/fragment/waiting")
    assert status == 200 and "test:bob" not in text and "Nothing you sent is waiting for an answer" in text, text
    status, text = get(server, "/fragment/agents")
    assert status == 200 and "<code>test:bob</code>" not in text and "waits on <code>you</code>" in text, text
    # The form endpoints: acting for an agent (allowed for test:* here) needs seeing its mail.
    for key in ("declined", "done", "replied", "open"):
        status, text = post(server, "/act", {"messageId": ids[key], "resolution": "done", "message": "x"})
        assert status == 303 and not leaks(text)
    assert app.mailbox.state(app.mailbox.get_row(ids["open"])).status == "pending"  # not resolved unseen
    status, text = post(server, "/answer", {"messageId": ids["replied"], "resolution": "reply", "message": "me too"})
    assert status == 303 and not leaks(text)
    status, text = post(server, "/send", {"to": "test:bob", "message": "hello bob"})
    assert status == 303 and not leaks(text)
    # a panel's button: whatever it answers (done, refused, no such button) carries no mail
    for name in sorted({p.name for p in panels(app)} | {"no-such-panel"}):
        status, text = post(server, "/panel-action", {"panel": name, "key": "1"})
        assert status == 303 and not leaks(text), name


def test_the_persons_own_open_mail_to_an_agent_shows_whom_they_wait_on(own_page: Any) -> None:
    app, server, ids = own_page
    status, text = post(server, "/send", {"to": "test:alice", "message": "Please rerun the import", "anticipation": "action"})
    assert status == 303, text
    status, text = get(server, "/fragment/waiting")
    assert status == 200 and "<code class=\"from\">you</code> wait on <code class=\"to\">test:alice</code> for an action" in text, text
    assert "Please rerun the import" in text and "no deadline" in text and not leaks(text)


def test_with_inspect_all_the_page_shows_everything_and_says_so(isolated_env: Path) -> None:
    app, server, ids = make_server(inspect_all=True)
    try:
        status, overview = get(server, "/")
        assert status == 200 and 'class="scope all"' in overview and leaks(overview)
        status, text = get(server, f"/c/{ids['declined']}")
        assert status == 200 and "SECRET-REASON-beta" in text
        status, text = get(server, "/fragment/waiting")  # everyone's open mail, bob's included
        assert status == 200 and "test:alice</code> waits on <code class=\"to\">test:bob</code> for an action" in text, text
    finally:
        server.close()
        app.close()


def read_event(stream: http.client.HTTPResponse) -> tuple[str, str]:
    """The next server-sent event of ``stream``: ``(event, data)``."""
    event, data = "", ""
    while True:
        line = stream.readline().decode()
        assert line, "the event stream ended"
        line = line.rstrip("\n")
        if not line:
            return event, data
        key, _, value = line.partition(": ")
        if key == "event":
            event = value
        elif key == "data":
            data = value


def test_the_live_stream_announces_only_the_persons_own_changes(own_page: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_server, "TICK_S", 1.0)  # five polls, not fifty: the test waits out one tick
    app, server, _ = own_page
    conn = http.client.HTTPConnection("127.0.0.1", server.page.port, timeout=STREAM_BOUND_S)
    conn.request("GET", "/events", headers={"Host": f"127.0.0.1:{server.page.port}", "Cookie": server.page.cookie()})
    stream = conn.getresponse()
    try:
        event, hello = read_event(stream)
        assert event == "hello"
        server.run(app.send(caller=ALICE, to="test:bob", body="SECRET-BODY-alpha again", anticipation="fyi"))
        # The stream ticks when nothing of the person's changed for a while: the tick after
        # alice wrote bob shows the stream looked past that change without announcing it.
        assert read_event(stream)[0] == "tick"
        mine = server.run(app.send(caller=ALICE, to=PERSON, body="live for the person", anticipation="fyi"))
        event, seq = read_event(stream)
        while event == "tick":  # a slow machine may tick again before the stream sees the send
            event, seq = read_event(stream)
        assert event == "change" and int(seq) > int(hello)
        newest_own = app.store.conn.execute("SELECT MAX(seq) FROM message_events WHERE message_id = ?",
                                            (mine.message["id"],)).fetchone()[0]
        assert int(seq) == newest_own
    finally:
        conn.close()


def test_the_receipts_panel_lists_only_the_readers_receipts(own_page: Any) -> None:
    app, server, ids = own_page
    status, text = get(server, "/fragment/panel/receipts")
    assert status == 200 and ids["mine"][:10] in text
    assert not any(ids[k][:10] in text for k in ("declined", "done", "replied")), text


@pytest.mark.parametrize("setting", ["", "1"])
def test_the_command_says_which_mail_the_page_shows(own_env: dict[str, str], setting: str) -> None:
    env = {**own_env, "AGENT_LINK_INSPECT_ALL": setting} if setting else own_env
    process = subprocess.Popen([sys.executable, "-m", "agent_link_core", "web", "--port", "0"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_url(process)
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    expected = "every agent's mail (AGENT_LINK_INSPECT_ALL is on)" if setting else "the mail of user:tester only"
    assert expected in err and "Traceback" not in err, err
