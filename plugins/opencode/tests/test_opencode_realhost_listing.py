"""The opencode harness lists the sessions of a real opencode server (pinned; AGENT_LINK_HOSTS_DIR
picks the folder) with their busy state, through the password the server asks for, leaves out
archived ones unless asked, and reports a server that is gone.

If the program is missing this test fails with "run `make hosts`" -- it never skips.
"""

from __future__ import annotations

import uuid

import pytest

from agent_link_core.app import App
from agent_link_opencode.harness import OpencodeHarness
from agent_link_testing.messages_stub import MessagesStub, Reply
from agent_link_testing.opencode_host import OpencodeServer

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(180)]


@pytest.mark.anyio
async def test_opencode_sessions_of_a_real_server_are_listed_busy_then_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    password = uuid.uuid4().hex
    # the first turn is held 8 s by the stub so the listing sees it busy
    with MessagesStub([Reply.text("slow answer", delay_s=8.0)]) as stub, OpencodeServer(stub.base_url, password=password) as server:
        monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "opencode")
        monkeypatch.setenv("AGENT_LINK_OPENCODE_SERVERS", str(server.url))
        monkeypatch.setenv("AGENT_LINK_OPENCODE_PASSWORD", password)
        app = App.create()
        try:
            harness = app.harnesses["opencode"]
            assert isinstance(harness, OpencodeHarness)
            quiet = server.request("POST", "/session", {"title": "quiet one"})
            busy = server.request("POST", "/session", {"title": "busy one"})
            server.request("POST", f"/session/{busy['id']}/prompt_async", {"parts": [{"type": "text", "text": "take your time"}]})
            stub.wait_for_main(1, timeout_s=60)

            listing = await harness.list_sessions()
            assert listing.complete and listing.provider["servers"][0]["available"], listing.provider
            by_id = {s.id: s for s in listing.sessions}
            assert by_id[busy["id"]].extra["status"] == "busy" and by_id[quiet["id"]].extra["status"] == "idle"
            assert by_id[quiet["id"]].title == "quiet one" and by_id[quiet["id"]].cwd == str(server.workdir)
            assert by_id[quiet["id"]].address == f"opencode:{quiet['id']}"

            server.wait_for_reply(busy["id"], timeout_s=60)
            again = await harness.get_session(busy["id"])
            assert again is not None and again.extra["status"] == "idle"

            # an archived session (time.archived set) is left out unless asked for
            server.request("PATCH", f"/session/{quiet['id']}", {"time": {"archived": 1}})
            assert quiet["id"] not in {s.id for s in (await harness.list_sessions()).sessions}
            archived = await harness.get_session(quiet["id"])
            assert archived is not None and archived.archived

            server.stop()
            gone = await harness.list_sessions()
            assert gone.sessions == [] and not gone.complete and gone.provider["reason"] == "unreachable"
        finally:
            await app.aclose()
