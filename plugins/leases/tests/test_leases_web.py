"""The File leases section of the ``agent-link web`` page in a real headless Chromium: it
lists who holds what, and a person releases a stale lease with its button (the lease ends,
the page says so); a button whose lease has ended already, and a post without the page's
CSRF token, change nothing. As with ``agent-link release --holder``, the buttons need
``AGENT_LINK_LEASE_ADMIN=1`` (in ``agent-link web``'s environment): without it the page
shows none and refuses a forged one, except for the person's own lease."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, active, claim
from agent_link_testing.web_page import HOST_PLUGINS, PageServer, browser_page, chromium, serve_cli


@pytest.fixture(params=[True])
def server(isolated_env: Path, request: pytest.FixtureRequest) -> Iterator[PageServer]:
    """``agent-link web --port 0`` (person ``user:tester``) in a subprocess, with
    ``AGENT_LINK_LEASE_ADMIN=1`` unless parametrized ``False``."""
    env = {**os.environ, "AGENT_LINK_DISABLE_PLUGINS": HOST_PLUGINS, "AGENT_LINK_WEB_USER": "tester",
           "AGENT_LINK_LEASE_ADMIN": "1" if request.param else "0"}
    with serve_cli(env) as page_server:
        yield page_server


@pytest.fixture
def page() -> Iterator[Any]:
    """A page of its own browser (this module's only browser test)."""
    with chromium() as browser, browser_page(browser) as tab:
        yield tab


def test_a_person_releases_a_stale_lease_on_the_page(app: App, repo: str, server: PageServer, page: Any) -> None:
    root = Project(repo, False)
    claim(app.store, "codex:gone-thread", root, ["src/pkg"], exclusive=True, reason="<b>split</b> the module", ttl_ms=600_000,
          now=now_ms())
    claim(app.store, "team:alice", root, ["docs"], exclusive=False, reason=None, ttl_ms=600_000, now=now_ms())
    page.goto(f"{server.base}/?token={server.token}")
    section = page.locator("[data-live='/fragment/panel/leases']")
    row = section.locator("tr", has_text="codex:gone-thread")
    assert "src/pkg" in row.inner_text() and "exclusive" in row.inner_text() and "<b>split</b> the module" in row.inner_text()
    assert section.locator("tr", has_text="team:alice").inner_text().count("shared") == 1
    stale_form = row.locator("form.panel-action").evaluate("f => f.outerHTML")

    row.locator("button", has_text="Release").click()
    page.wait_for_selector("p.notice")
    assert "user:tester released codex:gone-thread's lease of src/pkg" in page.inner_text("p.notice")
    assert [x["holder"] for x in active(app.store, now_ms())] == ["team:alice"]
    assert section.locator("tr", has_text="codex:gone-thread").count() == 0

    # the same button again (a page not reloaded yet): the lease has ended, nothing else changes
    page.evaluate("html => { document.body.insertAdjacentHTML('beforeend', html); document.forms[document.forms.length - 1].submit(); }",
                  stale_form)
    page.wait_for_selector("p.error")
    assert "ended already" in page.inner_text("p.error")
    assert [x["holder"] for x in active(app.store, now_ms())] == ["team:alice"]


def test_a_release_without_the_csrf_token_is_refused(app: App, repo: str, server: PageServer) -> None:
    lease = claim(app.store, "codex:t", Project(repo, False), ["src"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    key = str(lease["leases"][0]["id"])
    answer = server.request("POST", "/panel-action", body=f"panel=leases&key={key}".encode(),
                            headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": server.cookie()})
    assert answer.status == 403
    assert len(active(app.store, now_ms())) == 1


@pytest.mark.parametrize("server", [False], indirect=True)
def test_without_the_admin_setting_the_page_has_no_release_button(app: App, repo: str, server: PageServer, page: Any) -> None:
    root = Project(repo, False)
    claim(app.store, "codex:gone-thread", root, ["src/pkg"], exclusive=True, reason="split", ttl_ms=600_000, now=now_ms())
    claim(app.store, "user:tester", root, ["docs"], exclusive=True, reason="mine", ttl_ms=600_000, now=now_ms())
    ids = {x["holder"]: x["id"] for x in active(app.store, now_ms())}
    page.goto(f"{server.base}/?token={server.token}")
    section = page.locator("[data-live='/fragment/panel/leases']")
    assert "src/pkg" in section.locator("tr", has_text="codex:gone-thread").inner_text()
    assert section.locator("button", has_text="Release").count() == 0
    assert "AGENT_LINK_LEASE_ADMIN=1" in section.inner_text()

    def post(lease_id: int) -> None:
        """A Release button forged with the page's own CSRF token, as a stale or hand-made form would be."""
        page.evaluate("""([key]) => {
            const form = document.createElement('form');
            form.method = 'post'; form.action = '/panel-action';
            const csrf = document.querySelector("input[name='csrf']").value;
            for (const [name, value] of [['panel', 'leases'], ['key', key], ['csrf', csrf]]) {
                const input = document.createElement('input');
                input.type = 'hidden'; input.name = name; input.value = value; form.appendChild(input);
            }
            document.body.appendChild(form); form.submit();
        }""", [str(lease_id)])

    post(ids["codex:gone-thread"])
    page.wait_for_selector("p.error")
    assert "Releasing codex:gone-thread's lease is turned off" in page.inner_text("p.error")
    assert sorted(x["holder"] for x in active(app.store, now_ms())) == ["codex:gone-thread", "user:tester"]
    # the person's own lease: as agent-link release of one's own, no setting needed
    post(ids["user:tester"])
    page.wait_for_selector("p.notice")
    assert "user:tester released user:tester's lease of docs" in page.inner_text("p.notice")
    assert [x["holder"] for x in active(app.store, now_ms())] == ["codex:gone-thread"]
