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
* the same with ``oldmail_<name>`` filtered to ``agent_link.mail.<name>`` (the subject of
  plugin versions before the publisher joined it, which the relay still drains: nobody under
  these permissions can publish there, so what it finds was published before them), and on a
  machine upgraded from such a version with ``mail_<name>`` filtered to
  ``agent_link.mail.<name>.*``, its ``machine_<name>`` going on reading the old subject
  (:meth:`agent_link_machines.relay.Relay.consumer_names`);
* write only its own directory entry and name claim in the bucket (``dir.<name>``,
  ``claim.<name>``), and read (watch) the whole bucket: every machine's listing is public
  among the machines.

The mail stream and the bucket are created by the first relay that starts (``STREAM.CREATE``
of exactly those two); releasing another machine's name (``agent-link machines release``)
needs a user without these limits (the team's admin).
"""

from __future__ import annotations

from typing import Any

from agent_link_machines.common import BUCKET, STREAM, is_machine_name, legacy_durable, legacy_subject, mail_durable, mail_subject, upgraded_durable

#: JetStream's API prefix (the default domain)
API = "$JS.API"


def machine_permissions(machine: str) -> dict[str, Any]:
    """The ``permissions`` block of machine ``machine``'s NATS user.

    :returns: ``{"publish": {"allow": [...]}, "subscribe": {"allow": [...]}}`` (subjects).
    :raises ValueError: ``machine`` is not a machine name (1-64 of ``A-Z a-z 0-9 _ -``).
    """
    if not is_machine_name(machine):
        raise ValueError(f"{machine!r} is not a machine name (1-64 of A-Z a-z 0-9 _ -)")
    kv_stream = f"KV_{BUCKET}"
    durable, legacy, upgraded = mail_durable(machine), legacy_durable(machine), upgraded_durable(machine)
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
        # the mail earlier versions left on their subject, and the mail consumer of a machine
        # upgraded from one (agent_link_machines.relay.Relay.consumer_names)
        f"{API}.CONSUMER.CREATE.{STREAM}.{legacy}.{legacy_subject(machine)}",
        f"{API}.CONSUMER.INFO.{STREAM}.{legacy}", f"{API}.CONSUMER.MSG.NEXT.{STREAM}.{legacy}",
        f"$JS.ACK.{STREAM}.{legacy}.>",
        f"{API}.CONSUMER.CREATE.{STREAM}.{upgraded}.{mail_subject(machine, '*')}",
        f"{API}.CONSUMER.INFO.{STREAM}.{upgraded}", f"{API}.CONSUMER.MSG.NEXT.{STREAM}.{upgraded}",
        f"$JS.ACK.{STREAM}.{upgraded}.>",
        # the directory: read every entry (gets, watches), write its own
        f"$KV.{BUCKET}.dir.{machine}", f"$KV.{BUCKET}.claim.{machine}",
        f"{API}.DIRECT.GET.{kv_stream}.>", f"{API}.STREAM.MSG.GET.{kv_stream}",
        f"{API}.CONSUMER.CREATE.{kv_stream}", f"{API}.CONSUMER.CREATE.{kv_stream}.>", f"{API}.CONSUMER.DELETE.{kv_stream}.>",
        f"{API}.CONSUMER.INFO.{kv_stream}.>",
    ]
    return {"publish": {"allow": publish}, "subscribe": {"allow": ["_INBOX.>"]}}
