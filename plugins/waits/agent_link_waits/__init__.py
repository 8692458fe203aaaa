"""agent-link waits plugin (distribution ``agent-link-waits``).

Waiting for an answer: the ``wait_for_agent`` tool, ``message_agent``'s ``waitForReply`` and
``agent-link send --wait`` (through its own hook ``agent_link_wait_for_reply``), the ``agent-link wait``
command and ``send``'s ``--wait`` option; and one path per message: a push or an inbox read in any process leaves alone what a running
wait is about to return (``agent_link_held_messages``).

* :mod:`agent_link_waits.waits`: :class:`~agent_link_waits.waits.Waits` (one per App: :func:`~agent_link_waits.waits.waits_of`),
  the ``active_waits`` table;
* :mod:`agent_link_waits.tools`: the ``wait_for_agent`` tool; :mod:`agent_link_waits.cli`: ``agent-link wait``, ``send --wait``;
* :mod:`agent_link_waits.plugin`: the hooks;
* :mod:`agent_link_waits.wakeup`: :class:`~agent_link_waits.wakeup.Wakeup`, a waiter's wake-up on any process's commit
  (also the listings, machines and Claude plugins' waits).

This module imports nothing: the core reads the tables below without importing the plugin.
"""

#: the hooks this plugin specifies (docs/plugins.md, section 3), by the module specifying them; imported when one is first called
AGENT_LINK_HOOKSPECS = {"agent_link_waits.hookspecs": ("agent_link_wait_for_reply",)}

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_waits.plugin": (
    "agent_link_before_send",
    "agent_link_extend_tools",
    "agent_link_held_messages",
    "agent_link_register_commands",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_schema",
    "agent_link_tool_send",
    "agent_link_wait_for_reply",
)}

#: the settings each entry module registers, read without importing it
AGENT_LINK_SETTINGS = {"agent_link_waits.plugin": (
    {"name": "AGENT_LINK_WAIT_CAP_MS", "kind": "int", "default": 50000, "minimum": 1000, "maximum": 600000,
     "doc": "longest a wait runs in one tool call when the client sent no progress token (its tool-call timeout)"},
    {"name": "AGENT_LINK_WAIT_PROGRESS_MS", "kind": "int", "default": 10000, "minimum": 1000, "maximum": 60000,
     "doc": "interval of the progress notifications a wait sends when the client sent a progress token"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_waits.plugin": {"waits": (1,)}}

