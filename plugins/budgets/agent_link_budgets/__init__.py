"""agent-link output budgets plugin (distribution ``agent-link-budgets``).

An inbox read returns only what the caller's host shows the model in full: whole messages that fit, one larger
message in pages of its envelope (``messageId`` + ``offset``), delivered with its last page; a push larger than the
host shows in one piece is announced instead (``<agent-link-notice>``) and read from the inbox in pages. The limits are
what each host's harness declares (``OutputBudget``, agent_link_core/harness_decl.py), else ``AGENT_LINK_READ_BYTES``.

* :mod:`agent_link_budgets.fit`: the measures, the fitting of a read and the push's notice;
* :mod:`agent_link_budgets.plugin`: the hooks (``agent_link_fit_read``, ``agent_link_push_notice``).

This module imports nothing: the core reads the tables below without importing the plugin.
"""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_budgets.plugin": (
    "agent_link_fit_read",
    "agent_link_push_notice",
    "agent_link_register_settings",
)}

#: the settings each entry module registers, read without importing it
AGENT_LINK_SETTINGS = {"agent_link_budgets.plugin": (
    {"name": "AGENT_LINK_READ_BYTES", "kind": "int", "default": 40000, "minimum": 2000, "maximum": 4_000_000,
     "doc": "bytes one inbox read returns when the caller's host declares no limit (plain addresses, the CLI); "
            "a larger message comes in pages"},
)}
