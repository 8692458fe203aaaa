"""The page in a state dir agent-link cannot write: it shows the mail (as ``health`` says it
can be read), and a send from the page is refused with the reason, on the page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

from agent_link_testing.web_page import serve_cli
from tests.test_bad_configuration import unwritable


def test_the_page_shows_the_mail_of_a_state_dir_it_cannot_write(isolated_env: Path, own_env: dict[str, str]) -> None:
    sent = subprocess.run([sys.executable, "-m", "agent_link_core", "send", "user:tester", "read me on the page",
                           "--from", "test:alice", "--json"], env=own_env, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    message_id = json.loads(sent.stdout)["messageId"]
    with unwritable(isolated_env), serve_cli(own_env) as server:
        cookie = {"Cookie": server.cookie()}
        page = server.request("GET", "/", headers=cookie)
        assert page.status == 200 and b"read me on the page" in page.body  # type: ignore[attr-defined]
        csrf = page.body.decode().split('name="csrf" value="', 1)[1].split('"', 1)[0]  # type: ignore[attr-defined]
        form = urlencode({"csrf": csrf, "to": "test:alice", "message": "an answer"}).encode()
        refused = server.request("POST", "/send", body=form, headers={
            **cookie, "Content-Type": "application/x-www-form-urlencoded", "Origin": server.base})
        assert refused.status == 400 and b"is not writable" in refused.body  # type: ignore[attr-defined]
        # opening the conversation (delivery evidence when writable) shows it and says nothing was marked
        thread = server.request("GET", f"/c/{message_id}", headers=cookie)
        assert thread.status == 200 and b"read me on the page" in thread.body  # type: ignore[attr-defined]
        assert b"Nothing was marked delivered" in thread.body  # type: ignore[attr-defined]
