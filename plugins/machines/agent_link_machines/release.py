"""``agent-link machines release NAME``: free the name of a machine that is gone."""

from __future__ import annotations

import json
from typing import Any

from agent_link_machines.common import BUCKET, listing_stale
from agent_link_machines.relay import MachinesError, Relay
from agent_link_machines.secure import open_connection


async def release(app: Any, machine: str, force: bool = False) -> bool:
    """Free a machine name claimed by a machine that is gone.

    A machine whose directory entry is fresh (not stale by the heartbeat that machine
    publishes with it: :func:`~agent_link_machines.common.listing_stale`) looks alive: its
    name is kept unless ``force``, since a second machine taking it would share (split) its
    mail. A relay that finds its claim gone re-claims it at its next heartbeat, and one that
    finds it held by another instance stops (:meth:`Relay.directory_loop`).

    :returns: True when a claim was removed.
    :raises MachinesError: the machine looks alive (without ``force``); as :meth:`Relay.probe`;
        ConnectionError when the engine does not answer.
    """
    from nats.js.errors import KeyNotFoundError

    relay = Relay(app)
    await relay.probe()
    nc = await open_connection(**relay._options(), allow_reconnect=False)
    try:
        kv = await nc.jetstream().create_key_value(bucket=BUCKET, history=1)
        try:
            await kv.get(f"claim.{machine}")
        except KeyNotFoundError:
            return False
        if not force:
            stale, age = listing_stale(await _entry(kv, machine), app.config)
            if not stale and age is not None:
                raise MachinesError(
                    f"machine {machine} looks alive (its relay published its listing {max(age, 0) / 1000:.0f} s ago), so its name "
                    f"is kept: stop that relay first, or, if that machine is really gone, run "
                    f"`agent-link machines release {machine} --force`.")
        await kv.purge(f"claim.{machine}")
        await kv.purge(f"dir.{machine}")
        return True
    finally:
        await nc.close()


async def _entry(kv: Any, machine: str) -> dict[str, Any] | None:
    """Machine ``machine``'s directory entry as it last published it, or None."""
    from nats.js.errors import KeyNotFoundError

    try:
        entry = await kv.get(f"dir.{machine}")
        value = json.loads(entry.value or b"{}")
    except (KeyNotFoundError, ValueError):
        return None
    return value if isinstance(value, dict) else None
