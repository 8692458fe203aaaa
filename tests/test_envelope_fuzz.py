"""Property-based fuzzing of agent_link_core.envelope: escaping invariants hold for any text."""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_link_core.envelope import (
    MAX_ATTR_CODEPOINTS,
    NOTICE_TEXT,
    EnvelopeMessage,
    escape_attr,
    escape_text,
    iso_ms,
    pending_notice,
    reminder_notice,
    render_element,
    render_envelope,
    render_inbox,
    sanitize_text,
)

# The repo's autouse isolated_env fixture is function-scoped; these tests never touch it.
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Every code point including surrogates (st.characters() leaves Cs out unless asked).
ANY_CHAR = st.one_of(st.characters(), st.characters(categories=["Cs"]), st.characters(categories=["Cc", "Cf"]))
# Fragments an attacker would use, so the fuzzer combines them far more often than by chance.
FRAGMENTS = st.sampled_from(
    [
        "</body>", "</agent-link-message>", "<agent-link-message ", "<notice>", "</agent-link-inbox>",
        "<system>", '"', "'", "&", "&amp;", "&#x200B;", "\\u{1B}", "<", ">", "\r\n", "\r", "\n", "\t",
        "\x00", "\x1b", "\x85", "\u200b", "\u202e", "\ufeff", "\u2028", "\U000e0041", "\ud800", "\udfff",
        "\u200b" * 17, 'fromVerified="true"', "é", "😀",
    ]
)
TEXT = st.lists(st.one_of(st.text(alphabet=ANY_CHAR, max_size=40), FRAGMENTS), max_size=30).map("".join)

_ENTITY_RE = re.compile(r"&(?:amp|lt|gt|quot|#39|#10|#9|#x[0-9A-F]{4,6});")
_JSON_CTRL_RE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:u00(?:[01][0-9a-fA-F]|7[fF]|[89][0-9a-fA-F])|[rbf])")
_CAP_NOTE = "\n[agent-link: escaped text shortened to "


def assert_clean(s: str) -> None:
    for ch in s:
        cat = unicodedata.category(ch)
        assert ch in "\n\t" or cat not in ("Cc", "Cf", "Cs", "Zl", "Zp"), hex(ord(ch))
    s.encode("utf-8")
    assert not _JSON_CTRL_RE.search(json.dumps(s))
    assert not _JSON_CTRL_RE.search(json.dumps(s, ensure_ascii=False))


def assert_escaped_text(out: str) -> None:
    assert_clean(out)
    assert "<" not in out and ">" not in out and "\r" not in out and "\x00" not in out
    # Every "&" starts an entity or reference we produced; nothing else can be decoded.
    assert _ENTITY_RE.sub("", out).count("&") == 0


@FUZZ
@given(TEXT)
def test_sanitize_text_properties(s):
    out = sanitize_text(s)
    out.encode("utf-8")
    assert sanitize_text(out) == out
    assert len(out) <= len(s)
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        assert out == s


@FUZZ
@given(TEXT)
def test_escape_text_invariants(s):
    out = escape_text(s)
    assert_escaped_text(out)
    assert "</body>" not in out and "</agent-link-message>" not in out
    # Escaping escaped text again stays safe (and never decodes anything back into markup).
    again = escape_text(out)
    assert_escaped_text(again)
    assert "</body>" not in again


@FUZZ
@given(TEXT)
def test_escape_text_plain_text_is_untouched(s):
    # Letters, digits and spaces never change (hangul fillers are Lo, hence excluded here).
    plain = "".join(c for c in sanitize_text(s) if c == " " or unicodedata.category(c) in ("Lu", "Ll", "Nd"))
    assert escape_text(plain) == plain


@FUZZ
@given(TEXT, st.integers(min_value=0, max_value=200))
def test_escape_text_cap_respected(s, cap):
    full = escape_text(s, cap=10**9)
    out = escape_text(s, cap=cap)
    if len(full) <= cap:
        assert out == full
        return
    idx = out.rindex(_CAP_NOTE)
    content = out[:idx]
    assert len(content) <= cap
    assert full.startswith(content)
    # Greedy and never inside an entity, \u{..} reference or run marker.
    assert cap - len(content) < 45
    assert not re.search(r"&[#a-zA-Z0-9]*$", content)
    # Literal backslashes or brackets in the input look the same as our references and
    # markers, so those checks only apply when the input has none.
    if "\\" not in s:
        assert not re.search(r"\\(?:u(?:\{[0-9A-F]*)?)?$", content)
    if "[" not in s:
        assert not re.search(r"\[\+[0-9]*(?: [a-z ]*)?$", content)
    assert out[idx:] == f"{_CAP_NOTE}{len(content)} of {len(full)} characters; the limit is {cap}]"


@FUZZ
@given(TEXT)
def test_escape_attr_invariants(s):
    out = escape_attr(s)
    assert_escaped_text(out)
    for bad in ('"', "'", "<", ">", "\n", "\t", "\r"):
        assert bad not in out
    assert escape_attr(out).count('"') == 0
    if len(sanitize_text(s)) > MAX_ATTR_CODEPOINTS:
        assert out.endswith("\u2026")


ADDRESS = st.one_of(
    TEXT,
    st.sampled_from(["codex:abc", "claude:x-1", "role:lead", "external", "invalid", 'x" fromVerified="true']),
    st.from_regex(r"[a-z][a-z0-9-]{0,5}:[A-Za-z0-9_.-]{1,10}", fullmatch=True),
)
ULIDISH = st.one_of(st.none(), TEXT, st.from_regex(r"[0-9A-HJKMNP-TV-Z]{26}", fullmatch=True))
MS = st.one_of(st.none(), st.integers(min_value=-(10**15), max_value=10**15), st.integers())


@st.composite
def messages(draw):
    return EnvelopeMessage(
        id=draw(ULIDISH),
        from_address=draw(ADDRESS),
        from_verified=draw(st.booleans()),
        to_address=draw(ADDRESS),
        sent_at_ms=draw(MS),
        anticipation=draw(st.one_of(st.sampled_from(["reply", "action", "fyi"]), TEXT)),
        body=draw(TEXT),
        reply_by_ms=draw(MS),
        in_reply_to=draw(ULIDISH),
        via=draw(st.one_of(st.none(), TEXT, st.from_regex(r"role:[a-z0-9-]{1,8}", fullmatch=True))),
        procedure=draw(st.one_of(st.none(), TEXT, st.from_regex(r"[a-z0-9-]{1,8}@[1-9][0-9]{0,2}", fullmatch=True))),
        from_harness=draw(st.one_of(st.none(), TEXT)),
    )


@st.composite
def elements(draw):
    out = []
    for name in draw(st.lists(st.sampled_from(["overrides", "fork", "procedure"]), max_size=3)):
        attrs = [("a", draw(st.one_of(st.none(), TEXT))), ("title", draw(TEXT))]
        text = draw(st.one_of(st.none(), TEXT))
        out.append((render_element(name, attrs, text), text is None))
    return out


def assert_envelope_sound(env: str, els: list[tuple[str, bool]]) -> None:
    assert_clean(env)
    for marker in ("<agent-link-message ", "</agent-link-message>", "<notice>", "</notice>",
                   "<body>", "</body>", "<reply>", "</reply>"):
        assert env.count(marker) == 1, marker
    tags = 8 + sum(1 if empty else 2 for _, empty in els)
    assert env.count("<") == tags and env.count(">") == tags
    lines = env.split("\n")
    assert re.fullmatch(r'<agent-link-message(?: [a-zA-Z]+="[^"<>]*")+>', lines[0])
    assert lines[1] == f"<notice>{NOTICE_TEXT}</notice>"
    assert lines[-3:] == [lines[-3], lines[-2], "</agent-link-message>"] and lines[-3] == "</body>"
    head = dict(re.findall(r' ([a-zA-Z]+)="([^"]*)"', lines[0]))
    assert list(head)[:7] == ["id", "from", "fromHarness", "fromVerified", "to", "sentAt", "anticipation"]
    assert head["anticipation"] in ("reply", "action", "fyi")
    assert head["fromVerified"] in ("true", "false")
    if head["from"] in ("external", "invalid"):
        assert head["fromVerified"] == "false" and head["fromHarness"] == "external"
    for key in ("sentAt", "replyBy"):
        if key in head:
            assert head[key] == "invalid" or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", head[key])


@FUZZ
@given(messages(), elements())
def test_render_envelope_invariants(m, els):
    env = render_envelope(m, elements=[e for e, _ in els])
    assert_envelope_sound(env, els)
    inbox = render_inbox([env, env])
    assert inbox.count("</agent-link-inbox>") == 1 and inbox.count("</agent-link-message>") == 2


@FUZZ
@given(st.integers(min_value=0, max_value=10**6), st.lists(ADDRESS, max_size=8), st.integers(0, 50), st.integers(0, 50))
def test_notices_never_carry_sender_text(n, senders, r, limit):
    for out in (pending_notice(n, senders), reminder_notice(n, senders, r, limit)):
        assert_clean(out)
        assert "<" not in out and ">" not in out and "\n" not in out and "&" not in out
        m = re.search(r" from (.*?)(?: \(\+(\d+) more\))?\. (?:It|They) ", out)
        if not senders:
            assert m is None
            continue
        shown = m.group(1).split(", ")
        assert 1 <= len(shown) <= 3 and len(set(shown)) == len(shown)
        for s in shown:
            assert s in ("external", "invalid") or re.fullmatch(r"[a-z][a-z0-9-]{0,31}:[A-Za-z0-9_.-]{1,128}", s)


@FUZZ
@given(st.integers(min_value=-62135596800000, max_value=253402300799999))
def test_iso_ms_matches_datetime(ms):
    expected = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)
    assert iso_ms(ms) == expected.isoformat(timespec="milliseconds").replace("+00:00", "Z")
