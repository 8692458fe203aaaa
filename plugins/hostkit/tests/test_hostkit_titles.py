"""A session its host titled after an agent-link envelope is shown by sender and first words
(plugins/hostkit/agent_link_hostkit/titles.py; issue 29, item 6)."""

from __future__ import annotations

from agent_link_core.envelope import EnvelopeMessage, render_envelope
from agent_link_hostkit.titles import RAW_TITLE_CHARS, envelope_title, retitled


def test_envelope_title_names_sender_and_first_words_of_a_cut_or_whole_envelope() -> None:
    """Issue 29, item 6: a host that titles a session with its first message shows an envelope."""
    whole = render_envelope(EnvelopeMessage("01ARZ3NDEKTSV4RRFFQ69G5FAV", "team:alice", False, "team:bob", 0, "reply",
                                            "Please \u202ereview &lt;PR&gt; 42\u200b now and then merge it into main today"))
    assert envelope_title(whole) == "team:alice: Please review &lt;PR&gt; 42 now and then merge …"
    assert envelope_title(whole.splitlines()[0][:120]) == "message from team:alice"
    assert envelope_title('<agent-link-message id="01M8…" from="claude:…') == "message from an agent"
    assert envelope_title("fix the parser") is None and envelope_title(None) is None


def test_retitled_keeps_the_hosts_envelope_title_first_as_raw_title() -> None:
    envelope = '<agent-link-message id="x" from="team:alice">' + "x" * 400
    title, extra = retitled(envelope, {"server": "s"})
    assert title == "message from team:alice"
    assert list(extra) == ["rawTitle", "server"] and extra["rawTitle"] == envelope[:RAW_TITLE_CHARS]
    assert retitled(envelope, {"rawTitle": "the name"})[1] == {"rawTitle": "the name"}  # one the host plugin chose wins
    plain = {"server": "s"}
    assert retitled("fix the parser", plain) == ("fix the parser", plain) and retitled(None, plain) == (None, plain)
