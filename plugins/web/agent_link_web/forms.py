"""Reading a form POST of the page: its text fields, strict UTF-8, with the page's own limits and words.

A form body is read here, not by Starlette's form parser, which replaces bytes that are not UTF-8
(``%FF`` becomes U+FFFD, a multipart part falls back to Latin-1) and answers an oversize body in
its own words. Both encodings a form may have are read: ``application/x-www-form-urlencoded``
(the page's forms, and ``curl --data``; raw UTF-8 bytes are read as the text they are) and
``multipart/form-data`` (``curl -F``).
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from agent_link_core.envelope import MAX_BODY_BYTES

#: a whole form body: the message (at most MAX_BODY_BYTES, each byte at most 3 when %-escaped) and the other fields
MAX_FORM_BYTES = 4 * MAX_BODY_BYTES
#: how much of a too-large body is read and dropped before the refusal (a client still sending would miss the answer)
MAX_DRAINED_BYTES = 64 << 20
_FIELD_NAMES = {"to": "To", "message": "message"}


class FormRefused(Exception):
    """A form the page does not read: ``status`` (400, 413 or 415) and the sentence to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def too_large() -> FormRefused:
    return FormRefused(413, f"Refused: the form is too large. A message can be at most {MAX_BODY_BYTES} bytes "
                            "(UTF-8); shorten it, or send the path of a file instead of its content.")


def unfit_message(text: str, *, required: bool = True) -> str | None:
    """Why the page does not send ``text`` as a message (empty when ``required``, or over ``MAX_BODY_BYTES`` bytes of
    UTF-8), in the page's words; None when it may go."""
    if required and not text.strip():
        return "Write the message first: it is empty."
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        return f"The message is {size} bytes (UTF-8); a message can be at most {MAX_BODY_BYTES}. Shorten it, or send the path of a file instead."
    return None


def _text(name: bytes, value: bytes) -> tuple[str, str]:
    """A field's name and value, both strict UTF-8. :raises FormRefused: 400 naming the field."""
    try:
        key = name.decode("utf-8")
    except UnicodeDecodeError:
        raise FormRefused(400, "Refused: a form field's name is not UTF-8 text.") from None
    try:
        return key, value.decode("utf-8")
    except UnicodeDecodeError:
        shown = _FIELD_NAMES.get(key, key if key.isascii() and key.isprintable() and len(key) <= 40 else "a form field")
        raise FormRefused(400, f"Refused: the text of {shown} is not valid UTF-8. Nothing was sent; "
                               "type it again, or send it from a program that writes UTF-8.") from None


def parse_urlencoded(raw: bytes) -> dict[str, str]:
    """Fields of an ``application/x-www-form-urlencoded`` body (the first of a repeated name wins);
    ``%XX`` escapes and raw bytes alike must make UTF-8. :raises FormRefused: 400."""
    fields: dict[str, str] = {}
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, _, value = pair.partition(b"=")
        key, text = _text(unquote_to_bytes(name.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" ")))
        fields.setdefault(key, text)
    return fields


def parse_multipart(content_type: str, raw: bytes) -> dict[str, str]:
    """The text fields (parts without a file name) of a ``multipart/form-data`` body.
    :raises FormRefused: 400 for a body that is not multipart or a part that is not UTF-8."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw)
    if not message.is_multipart():
        raise FormRefused(400, "Refused: the form's body is not the multipart/form-data its Content-Type says.")
    fields: dict[str, str] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or part.get_param("filename", header="content-disposition") is not None:
            continue
        payload = part.get_payload(decode=True)
        key, text = _text(name.encode("utf-8", "surrogateescape"), payload if isinstance(payload, bytes) else b"")
        fields.setdefault(key, text)
    return fields
