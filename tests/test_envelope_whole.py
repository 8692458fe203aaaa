"""Bodies the envelope would shorten (issue 18): a body within the 64 KiB limit whose escaped
form is longer than one read shows (many ``<`` or ``&``) reaches the recipient whole, and
the sender is told at send time. Through a real MCP client session."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from agent_link_core.envelope import MAX_BODY_BYTES, MAX_ENVELOPE_BODY_CHARS, MAX_ESCAPED_CHARS, escape_text
from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]
ALL_PLUGINS = " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))


def test_no_body_within_the_limit_is_shortened_in_its_envelope() -> None:
    for worst in ("&", "<", "a\x01", "a\u200b"):
        body = (worst * MAX_BODY_BYTES)[: MAX_BODY_BYTES // len(worst.encode("utf-8"))]
        body = body.encode("utf-8")[:MAX_BODY_BYTES].decode("utf-8", "ignore")
        escaped = escape_text(body, cap=MAX_ENVELOPE_BODY_CHARS)
        assert "[agent-link:" not in escaped, worst


async def test_a_heavily_escaped_body_arrives_whole_and_the_sender_is_told() -> None:
    body = "<&" * 20_000 + "end"  # 40,003 bytes, escapes to 180,003 characters
    async with agent_link_mcp({"AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, "AGENT_LINK_ADDRESS": "test:alice"}) as alice:
        sent = await alice.call("message_agent", {"to": "test:bob", "message": body})
        assert sent["ok"] is True
        [warning] = [w for w in sent["warnings"] if w["code"] == "body_escapes_large"]
        assert warning["details"] == {"bodyBytes": 40_003, "escapedChars": 180_003, "limitChars": MAX_ESCAPED_CHARS}
        small = await alice.call("message_agent", {"to": "test:bob", "message": "a < b"})
        assert "body_escapes_large" not in {w["code"] for w in small.get("warnings", [])}
    async with agent_link_mcp({"AGENT_LINK_DISABLE_PLUGINS": ALL_PLUGINS, "AGENT_LINK_ADDRESS": "test:bob"}) as bob:
        # larger than one read of a plain address (AGENT_LINK_READ_BYTES): it comes in pages, all of it
        inbox = await bob.call("read_agent_link_inbox", {})
        parts, page = [inbox["renderedBlock"]], inbox["page"]
        while page is not None and page["nextOffset"] is not None:
            inbox = await bob.call("read_agent_link_inbox", {"messageId": page["messageId"], "offset": page["nextOffset"]})
            parts.append(inbox["renderedBlock"])
            page = inbox["page"]
        block = "".join(parts)
        [whole] = re.findall(r"\n<body>\n(.*?)\n</body>\n", block, flags=re.S)[:1]
        assert whole == "&lt;&amp;" * 20_000 + "end" and "shortened" not in block
