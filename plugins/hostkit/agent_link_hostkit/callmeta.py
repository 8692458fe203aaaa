"""Reading caller context (session and tool call ids) out of a tool call's MCP ``_meta``.

Hosts put these under different keys and namespaces (docs/behaviour.md
§2 and §25); harness and audit plugins (the receipts plugin's origin block) pass their own
key lists and namespaces, and share the lookup rules here.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_link_core.envelope import sanitize_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_META_CHARS = 300


def _lookup(scope: Mapping[str, Any], key: str) -> object:
    """``scope[key]``, else the dotted path ``key`` (``caller.thread.id``) into nested maps."""
    if key in scope:
        return scope[key]
    node: object = scope
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def meta_text(meta: Mapping[str, Any], keys: tuple[str, ...], namespaces: tuple[str, ...] = ()) -> str | None:
    """The first usable value for ``keys`` in ``meta``.

    :param meta: a tool call's ``_meta`` (may be empty).
    :param keys: tried in order, the first key winning over later ones wherever it is found;
        each is looked up at the top level and then under each of ``namespaces``.
    :returns: a string or number (never a boolean), sanitized, trimmed and cut to
        :data:`MAX_META_CHARS` characters; None when no key gives one.
    """
    if not meta:  # a client that sends no _meta: nothing to look in, on every send's path
        return None
    scopes = [meta] + [meta[ns] for ns in namespaces if isinstance(meta.get(ns), Mapping)]
    for key in keys:
        for scope in scopes:
            value = _lookup(scope, key)
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                continue
            text = sanitize_text(str(value)).strip()[:MAX_META_CHARS]
            if text:
                return text
    return None
