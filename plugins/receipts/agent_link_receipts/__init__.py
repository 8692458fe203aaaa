"""agent-link receipts plugin (distribution ``agent-link-receipts``).

An audit record (a *receipt*) for every launch, message, reply, delivery, handover,
reminder, resolution and status change, written from the core's ``agent_link_on_event``
hook into the ``receipts`` table of the state database. Pieces:

* :mod:`agent_link_receipts.origin`: where a send came from, field by field, with sources;
* :mod:`agent_link_receipts.build`: one receipt from one event (format version 1);
* :mod:`agent_link_receipts.ledger`: storage, filtered listing (newest first), export, and
  the optional JSONL copy (``AGENT_LINK_RECEIPT_LOG``);
* :mod:`agent_link_receipts.tools` / :mod:`agent_link_receipts.cli`: list_agent_link_receipts,
  ``agent-link receipts`` and ``agent-link receipts export --jsonl``;
* :mod:`agent_link_receipts.plugin`: the hooks.
"""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_receipts.plugin": (
    "agent_link_before_send",
    "agent_link_health",
    "agent_link_on_event",
    "agent_link_record_event",
    "agent_link_register_commands",
    "agent_link_register_legacy_importers",
    "agent_link_register_panels",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_schema",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_receipts.plugin": (
    {"name": "AGENT_LINK_RECEIPT_LOG", "kind": "path", "aliases": ("CODEX_AGENT_LINK_RECEIPT_LOG", "CLAUDE_AGENT_LINK_RECEIPT_LOG"),
     "doc": "also append every receipt to this JSONL file (the database stays the record)"},
    {"name": "AGENT_LINK_INFER_RECEIPT_ORIGIN", "kind": "flag", "default": True,
     "doc": "fill a receipt's origin from the environment when the call gives none"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_receipts.plugin": {"receipts": (1, 2, 3)}}
