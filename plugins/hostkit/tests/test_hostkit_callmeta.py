"""Caller context from a tool call's _meta (agent_link_hostkit.callmeta): key order, nesting, namespaces, clean values."""

from __future__ import annotations

from agent_link_hostkit.callmeta import MAX_META_CHARS, meta_text

KEYS = ("callerThreadId", "caller.thread.id", "threadId")


def test_first_key_wins_over_namespaces() -> None:
    meta = {"threadId": "top", "ns": {"callerThreadId": "namespaced"}}
    assert meta_text(meta, KEYS, ("ns",)) == "namespaced"  # an earlier key beats the top level
    assert meta_text(meta, KEYS) == "top"  # namespaces are searched only when named


def test_literal_then_dotted_path() -> None:
    assert meta_text({"caller.thread.id": "lit", "caller": {"thread": {"id": "nested"}}}, KEYS) == "lit"
    assert meta_text({"caller": {"thread": {"id": "nested"}}}, KEYS) == "nested"


def test_only_clean_text_values() -> None:
    assert meta_text({"threadId": True}, KEYS) is None
    assert meta_text({"threadId": {"id": 1}}, KEYS) is None
    assert meta_text({"threadId": "   "}, KEYS) is None
    assert meta_text({"threadId": 42}, KEYS) == "42"
    assert meta_text({"threadId": " a\ud800b "}, KEYS) == "a\ufffdb"
    assert len(meta_text({"threadId": "x" * 1000}, KEYS) or "") == MAX_META_CHARS
