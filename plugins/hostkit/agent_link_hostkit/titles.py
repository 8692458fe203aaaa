"""A session its host titled after an agent-link envelope (a host names a session after its first message, and a session
agent-link started begins with one) is shown by sender and the body's first words: a title that looks like a peer
message must not reach a model as one. The host plugins apply :func:`retitled` to every session they list.
"""

from __future__ import annotations

import re
from typing import Any

from agent_link_core.addresses import EXTERNAL, is_address
from agent_link_core.envelope import INVISIBLE_RUN_RE, sanitize_text

#: how much of a host's raw title a session keeps in ``extra["rawTitle"]`` when it shows another
RAW_TITLE_CHARS = 300
#: how many words of the body a title shows, and at most how many characters
TITLE_WORDS = 8
TITLE_CHARS = 60

_FROM = re.compile(r'\sfrom="([^"<>]*)')
_BODY = re.compile(r"(?s)<body>\n?(.*?)(?:\n?</body>|$)")
_ENTITY = re.compile(r"&(?:#x([0-9A-Fa-f]{1,6})|#([0-9]{1,7})|(lt|gt|amp|quot));")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_DROP = re.compile(INVISIBLE_RUN_RE)


def _unescape(match: re.Match[str]) -> str:
    if match.group(3):
        return _ENTITIES[match.group(3)]
    code = int(match.group(1), 16) if match.group(1) else int(match.group(2))
    return chr(code) if code < 0x110000 else ""


def envelope_title(text: str | None) -> str | None:
    """What a person would call a session that its host titled after an agent-link envelope (its first user message):
    ``"<sender>: <the body's first words>"``, or ``"message from <sender>"`` when the title was cut before the body; None
    when ``text`` is no envelope.

    :param text: the host's title or first user message, possibly cut anywhere.
    :returns: one line of at most ``TITLE_CHARS`` characters of body text (control, format and bidi characters dropped)
        after the sender (kept only when it is a well-formed address).
    """
    if not isinstance(text, str) or not text.lstrip().startswith("<agent-link-message"):
        return None
    found = _FROM.search(text)
    sender = found.group(1) if found is not None else ""
    sender = sender if is_address(sender) or sender == EXTERNAL else "an agent"
    body = _BODY.search(text)
    words = ""
    if body is not None:
        plain = _DROP.sub(" ", sanitize_text(_ENTITY.sub(_unescape, body.group(1))))
        every = plain.split()
        words = " ".join(every[:TITLE_WORDS])
        if len(words) > TITLE_CHARS:
            words = words[:TITLE_CHARS - 1].rstrip() + "…"
        elif len(every) > TITLE_WORDS:
            words += " …"
    return f"{sender}: {words}" if words else f"message from {sender}"


def retitled(title: str | None, extra: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``(title, extra)`` for a :class:`~agent_link_core.model.Session`: an envelope ``title`` shown as
    :func:`envelope_title`, the host's title then kept first in a new ``extra`` as ``rawTitle`` (at most
    :data:`RAW_TITLE_CHARS`; a ``rawTitle`` already in ``extra`` wins); any other title and ``extra`` as they are."""
    shown = envelope_title(title)
    if shown is None or title is None:
        return title, extra
    return shown, {"rawTitle": title[:RAW_TITLE_CHARS], **extra}
