"""The page in a real headless Chromium (the system's, driven by Playwright).

Waits in the browser are bounded polls (``STEP_BOUND_MS``), never timing assertions: "appears
live" means the page showed it without being reloaded, however long the machine took.
Screenshots of the main views go to ``test-artifacts/web/`` (or ``AGENT_LINK_WEB_SCREENSHOTS``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.web_page import (
    PageServer,
    ThreadServer,
    run_in_thread,
    screenshot_dir,
    wait_until,
)

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.harness import Delivery, Harness, SessionListing
from agent_link_core.model import Caller, Session
from agent_link_web.panels import Panel, PanelLink, PanelView

CORPUS = json.loads((Path(__file__).parent / "hostile_corpus.json").read_text(encoding="utf-8"))["payloads"]
# What the page itself contains; anything else in the DOM after rendering the corpus was injected.
DOM_AUDIT = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    const tag = el.tagName.toLowerCase();
    if (['iframe', 'object', 'embed', 'img', 'svg', 'math', 'base', 'meta', 'style', 'template', 'noscript',
         'details', 'input[autofocus]'].includes(tag) && !(tag === 'meta' && !el.getAttribute('http-equiv'))) bad.push(tag);
    if (tag === 'script' && el.getAttribute('src') !== '/static/app.js') bad.push('script');
    if (tag === 'link' && el.getAttribute('href') !== '/static/style.css') bad.push('link');
    if (el.id && el.id.startsWith('injected')) bad.push('#' + el.id);
    for (const attr of el.attributes) {
      if (attr.name.startsWith('on')) bad.push(tag + '[' + attr.name + ']');
      if (['href', 'src', 'action', 'data'].includes(attr.name) && /^\\s*(javascript|data):/i.test(attr.value)) bad.push(tag + '[' + attr.name + '=' + attr.value.slice(0, 20) + ']');
      if (attr.name === 'action' && !attr.value.startsWith('/')) bad.push('form[action=' + attr.value + ']');
    }
  }
  return {bad, pwned: window.__pwned === 1, scripts: document.scripts.length, forms: document.forms.length};
}"""


def enter(page: Any, server: PageServer, path: str = "/") -> None:
    """Open ``path`` through the token link (which sets the cookie and drops the token)."""
    page.goto(f"{server.base}{path}{'&' if '?' in path else '?'}token={server.token}")
    assert "token=" not in page.url


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(screenshot_dir() / f"{name}.png"), full_page=True)


def test_the_page_needs_its_token(cli_server: PageServer, page: Any) -> None:
    response = page.goto(cli_server.base + "/")
    assert response.status == 403
    assert "needs its token" in page.inner_text("body")
    enter(page, cli_server)
    assert page.locator("h2", has_text="Agents").count() == 1
    assert page.locator("#live.on").count() == 1 or page.wait_for_selector("#live.on")
    page.goto(cli_server.base + "/")  # the cookie now carries the access
    assert page.locator("h2", has_text="Conversations").count() == 1


ANSWER = "Deploy main, please: café, 日本, 🎉."


def test_mail_from_an_mcp_process_appears_live_and_a_reply_typed_on_the_page_reaches_the_agent(
        cli_server: PageServer, page: Any, mcp_agent: Any) -> None:
    alice = mcp_agent("team:alice")
    enter(page, cli_server)
    page.evaluate("window.__sameDocument = 'yes'")
    sent = alice.call("message_agent", {"to": "team:bob", "message": "Build 4711 is green <b>ship it</b>"})
    assert sent["ok"], sent
    page.wait_for_selector("#conversations >> text=Build 4711 is green <b>ship it</b>")
    question = alice.call("message_agent", {"to": "user:tester", "message": "Which branch should I deploy?",
                                            "anticipation": "reply"})
    assert question["ok"], question
    page.wait_for_selector("#inbox >> text=Which branch should I deploy?")
    assert page.evaluate("window.__sameDocument") == "yes"  # shown without a reload
    shot(page, "overview")

    page.click(f"#inbox a[href^='/c/{question['messageId']}']")
    page.wait_for_selector("form.answer-form textarea")
    assert page.locator(f"#m-{question['messageId']} .badge", has_text="delivered").count() == 1  # seen on the page
    page.fill("form.answer-form textarea", ANSWER)  # text outside ASCII arrives as typed
    shot(page, "conversation-answering")
    page.click("form.answer-form button[type=submit]")
    page.wait_for_selector(f"#m-{question['messageId']} >> text=replied")
    shot(page, "conversation")

    def answered() -> dict[str, Any] | None:
        inbox = alice.call("read_agent_link_inbox", {})
        return inbox if ANSWER in inbox["renderedBlock"] else None

    inbox = wait_until(answered)
    assert inbox, "the answer typed on the page never reached team:alice's inbox"
    block = inbox["renderedBlock"]
    assert 'from="user:tester"' in block and '<origin kind="person" through="web-page" />' in block
    assert "<notice>A person (user:tester) wrote this message" in block
    status = alice.call("get_agent_link_message_status", {"messageId": question["messageId"]})
    assert status["status"] == "replied" and status["resolution"]["by"] == "user:tester"

    page.fill("header.top input[name=q]", "branch")
    page.press("header.top input[name=q]", "Enter")
    page.wait_for_selector("ul.results mark")
    assert "branch" in page.inner_text("ul.results mark").lower()
    shot(page, "search")


def test_without_inspect_all_the_page_shows_the_person_their_own_mail_only(
        own_cli_server: PageServer, page: Any, mcp_agent: Any) -> None:
    alice = mcp_agent("team:alice")
    assert alice.call("message_agent", {"to": "team:bob", "message": "SECRET-BODY for bob only"})["ok"]
    enter(page, own_cli_server)
    assert "Showing the mail you sent or received as user:tester" in page.inner_text("#scope")
    page.wait_for_selector("#live.on")
    page.evaluate("window.__sameDocument = 'yes'")
    assert alice.call("message_agent", {"to": "team:bob", "message": "SECRET-BODY live for bob"})["ok"]
    question = alice.call("message_agent", {"to": "user:tester", "message": "A question for you", "anticipation": "reply"})
    assert question["ok"], question
    page.wait_for_selector("#inbox >> text=A question for you")  # the person's own mail appears live
    assert page.evaluate("window.__sameDocument") == "yes"
    assert "SECRET" not in page.inner_text("body")
    shot(page, "overview-own-mail")
    page.fill("header.top input[name=q]", "SECRET")
    page.press("header.top input[name=q]", "Enter")
    page.wait_for_selector("p.empty >> text=No messages match.")
    assert page.locator("ul.results li").count() == 0 and "SECRET-BODY" not in page.inner_text("main")


# -- the hostile corpus ---------------------------------------------------------------------


class HostileHarness(Harness):
    """Sessions whose titles and folders are the hostile corpus."""

    name = "evil"

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([Session(f"evil:s{i}", "evil", f"s{i}", title=p, cwd=p, loaded=i % 2 == 0,
                                       last_activity_ms=1_800_000_000_000 + i) for i, p in enumerate(CORPUS)])

    async def get_session(self, session_id: str) -> Session | None:
        return next((s for s in (await self.list_sessions()).sessions if s.id == session_id), None)

    async def deliver(self, message: dict[str, Any], envelope: str, options: Any) -> Delivery:
        return Delivery(delivered=True, via="evil-push", state="pushed", evidence={"echo": CORPUS[0], "note": CORPUS[3]})


class HostilePlugin:
    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(HostileHarness())

    @hookimpl
    def agent_link_register_panels(self, register: Any) -> None:
        def render(app: App) -> PanelView:
            first = app.store.conn.execute("SELECT id FROM messages ORDER BY rowid LIMIT 1").fetchone()
            link = PanelLink(CORPUS[1], first["id"]) if first else None
            return PanelView(["payload", "link"], [[p, link] for p in CORPUS[:8]], note=CORPUS[2],
                             agent_labels={"evil:s0": [CORPUS[4]], "team:alice": [CORPUS[5]]})

        register(Panel("hostile", CORPUS[6], render))
        register(Panel("broken", "A broken panel", lambda app: 1 / 0))  # type: ignore[arg-type,return-value]

        def leave(app: App) -> PanelView:
            raise SystemExit(5)  # the plugin's fault like any exception, never the page's end

        register(Panel("leaving", "A leaving panel", leave))


@pytest.fixture
def hostile_server(isolated_env: Path) -> Iterator[tuple[ThreadServer, list[str]]]:
    app = App.create({**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude", "AGENT_LINK_INSPECT_ALL": "1"},
                     extra_plugins=(HostilePlugin(),))
    alice = Caller("team:alice", "config", "team")

    async def seed() -> list[str]:
        await app.list_agents()  # remembers the hostile titles for search
        ids = []
        for i, payload in enumerate(CORPUS):
            out = await app.send(caller=alice, to=f"evil:s{i}", body=payload, anticipation="reply")
            ids.append(out.message["id"])
        await app.reply(caller=Caller("evil:s3", "config", "evil"), message_id=ids[3], resolution="decline", message=CORPUS[3])
        await app.send(caller=alice, to="user:tester", body=CORPUS[0] + "\n" + CORPUS[1], anticipation="reply")
        return ids

    ids = run_in_thread(seed)
    server = ThreadServer(app, act_for=("evil:*",))
    try:
        yield server, ids
    finally:
        server.close()
        app.close()


def audit(page: Any) -> None:
    found = page.evaluate(DOM_AUDIT)
    assert found["bad"] == [] and not found["pwned"], found
    assert page.dialogs == []


def test_a_hostile_corpus_runs_no_script_and_adds_no_element(hostile_server: tuple[ThreadServer, list[str]], page: Any) -> None:
    server, ids = hostile_server
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    enter(page, server.page)
    page.wait_for_selector("#live.on")
    body = page.inner_text("body")
    assert CORPUS[0] in body and "a broken panel" in body.lower() and "This section failed (plugin HostilePlugin: ZeroDivisionError" in body
    assert "This section failed (plugin HostilePlugin: SystemExit: 5)" in body and "AGENT_LINK_DISABLE_PLUGINS=HostilePlugin" in body
    assert page.locator(".agent .badge", has_text=CORPUS[4]).count() == 1  # a hostile label, shown as text
    audit(page)
    # a live refresh re-renders every section from the server: still nothing injected
    server.run(server.app.send(caller=Caller("evil:s1", "config", "evil"), to="team:alice", body=CORPUS[2] + " live"))
    page.wait_for_selector("#conversations >> text=live")
    audit(page)
    shot(page, "hostile-overview")
    for mid in (ids[3], ids[5], ids[16]):
        page.goto(f"{server.page.base}/c/{mid}")
        page.wait_for_selector(f"#m-{mid}")
        assert CORPUS[3] in page.inner_text(f"#m-{ids[3]}") if mid == ids[3] else True
        audit(page)
    # a right-to-left override, zero-width characters and NUL are shown, not obeyed
    assert "\\u{202E}evil\\u{202C} \\u{200B}\\u{200D} hidden <\\u{0000}script>" in page.inner_text(f"#m-{ids[16]}")
    assert not any(ch in page.content() for ch in "\u202e\u202c\u200b\u200d\x00")
    shot(page, "hostile-conversation")
    page.goto(f"{server.page.base}/search?q=alert")
    page.wait_for_selector("ul.results")
    audit(page)
    page.goto(f"{server.page.base}/search?q=%22never+closed")
    assert "quote is opened and never closed" in page.inner_text(".error")
    audit(page)
    shot(page, "hostile-search")
    assert errors == [], errors
