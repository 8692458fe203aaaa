"""The NATS permissions of one machine's user: it receives only the mail addressed to its
sessions (``agent-link machines permissions NAME`` prints them for the server's config).

NATS checks every subject a connection publishes or subscribes to against its user's
``permissions`` (https://docs.nats.io/running-a-nats-service/configuration/securing_nats/authorization).
Reading a JetStream stream goes through API subjects that name the stream, the consumer and
its filter, so a machine's user may only:

* publish mail to any machine as itself (``agent_link.mail.*.<name>``: the last token names
  the publisher, which the receiving relay checks against the records' origin) but never
  subscribe to those subjects;
* create, inspect and pull from its own durable consumer ``machine_<name>``, filtered to
  ``agent_link.mail.<name>.*``, and acknowledge what that consumer gave it; no other consumer
  of the mail stream, and no direct reads of its messages (``STREAM.MSG.GET``, ``DIRECT.GET``);
* write only its own directory entry and name claim in the bucket (``dir.<name>``,
  ``claim.<name>``), and read (watch) the whole bucket: every machine's listing is public
  among the machines.

The mail stream and the bucket are created by the first relay that starts (``STREAM.CREATE``
of exactly those two); releasing another machine's name (``agent-link machines release``)
needs a user without these limits (the team's admin).
"""

from __future__ import annotations

from typing import Any

from agent_link_machines.common import BUCKET, MACHINE_RE, STREAM, mail_subject

#: JetStream's API prefix (the default domain)
API = "$JS.API"


def machine_permissions(machine: str) -> dict[str, Any]:
    """The ``permissions`` block of machine ``machine``'s NATS user.

    :returns: ``{"publish": {"allow": [...]}, "subscribe": {"allow": [...]}}`` (subjects).
    :raises ValueError: ``machine`` is not a machine name (1-64 of ``A-Z a-z 0-9 _ -``).
    """
    if not MACHINE_RE.match(machine):
        raise ValueError(f"{machine!r} is not a machine name (1-64 of A-Z a-z 0-9 _ -)")
    kv_stream = f"KV_{BUCKET}"
    durable = f"machine_{machine}"
    publish = [
        mail_subject("*", machine),  # mail to any machine, as itself
        f"{API}.INFO",
        f"{API}.STREAM.CREATE.{STREAM}", f"{API}.STREAM.INFO.{STREAM}",
        f"{API}.STREAM.CREATE.{kv_stream}", f"{API}.STREAM.INFO.{kv_stream}",
        # its own consumer of the mail stream, filtered to its own subject, and nothing else
        # (the server refuses a create whose subject names another filter than its request's)
        f"{API}.CONSUMER.CREATE.{STREAM}.{durable}.{mail_subject(machine, '*')}",
        f"{API}.CONSUMER.INFO.{STREAM}.{durable}", f"{API}.CONSUMER.MSG.NEXT.{STREAM}.{durable}",
        f"$JS.ACK.{STREAM}.{durable}.>",
        # the directory: read every entry (gets, watches), write its own
        f"$KV.{BUCKET}.dir.{machine}", f"$KV.{BUCKET}.claim.{machine}",
        f"{API}.DIRECT.GET.{kv_stream}.>", f"{API}.STREAM.MSG.GET.{kv_stream}",
        f"{API}.CONSUMER.CREATE.{kv_stream}", f"{API}.CONSUMER.CREATE.{kv_stream}.>", f"{API}.CONSUMER.DELETE.{kv_stream}.>",
        f"{API}.CONSUMER.INFO.{kv_stream}.>",
    ]
    return {"publish": {"allow": publish}, "subscribe": {"allow": ["_INBOX.>"]}}
