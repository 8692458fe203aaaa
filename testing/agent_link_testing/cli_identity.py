"""Test scripts that name their address on the command line act as that address."""

from __future__ import annotations

from collections.abc import Sequence

from agent_link_core.addresses import is_address


def named_address_env(args: Sequence[str]) -> dict[str, str]:
    """``{"AGENT_LINK_ADDRESS": X}`` when ``args`` name a well-formed address with ``--as X``
    or ``--from X``, else ``{}``.

    The CLI reads mail as a named address only for a process that is that address (or with
    ``AGENT_LINK_INSPECT_ALL``), so a test playing a script of ``team:bob`` runs it with the
    address ``team:bob``, as a real script of that agent would. Malformed values are left to
    the command to refuse.
    """
    for flag in ("--as", "--from"):
        if flag in args[:-1]:
            value = args[list(args).index(flag) + 1]
            if is_address(value):
                return {"AGENT_LINK_ADDRESS": value}
    return {}
