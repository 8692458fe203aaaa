"""Small shared pieces of the web plugin: the person's address and the origin marker."""

from __future__ import annotations

import contextvars
import fnmatch
import re

from agent_link_core.errors import AgentLinkError

#: metadata key and value stored on a message a person wrote on the page
AUTHOR_KEY = "author"
ORIGIN = {"kind": "person", "through": "web-page"}
#: set (to the person's address) only while the page itself sends or answers
page_person: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent_link_web_person", default=None)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")


def person_address(name: str | None, given_as: str = "AGENT_LINK_WEB_USER") -> str:
    """``user:<name>`` for the person using the page.

    :param name: the name given (``--as`` or ``AGENT_LINK_WEB_USER``); None: the login name,
        with characters an address cannot hold replaced by ``-``.
    :param given_as: where ``name`` came from, the error's path: ``as`` (the ``--as`` option)
        or the variable's name.
    :raises AgentLinkError: ``invalid_arguments`` for a given name that is not 1-128 of
        ``A-Z a-z 0-9 _ . -``.
    """
    if name is None:
        import getpass  # (and termios) only the page needs a login name, not every command's plugin load

        try:
            login = getpass.getuser()
        except (KeyError, OSError):
            login = "person"
        return "user:" + (re.sub(r"[^A-Za-z0-9_.-]", "-", login)[:128] or "person")
    if not _NAME_RE.match(name):
        raise AgentLinkError("invalid_arguments", f"{name!r} cannot be a person's name on the page.",
                             {"errors": [{"path": given_as, "rule": "pattern",
                                          "expected": "1-128 of A-Z a-z 0-9 _ . -"}]})
    return f"user:{name}"


def act_for_patterns(value: str | None) -> tuple[str, ...]:
    """The patterns of ``AGENT_LINK_WEB_ACT_FOR`` (comma or space separated)."""
    return tuple(p for p in re.split(r"[,\s]+", value or "") if p)


def may_act_for(patterns: tuple[str, ...], address: str) -> bool:
    """True when the owner allowed the person to decline/done mail of ``address``
    (an exact address or a shell-style pattern such as ``team:*``)."""
    return any(fnmatch.fnmatchcase(address, p) for p in patterns)
