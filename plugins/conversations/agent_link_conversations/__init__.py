"""agent-link conversations plugin: the tree of messages joined by ``reply_to``
(:mod:`agent_link_conversations.conversation`), by MCP tool (``get_agent_link_conversation``,
:mod:`agent_link_conversations.tools`, which also holds the mailbox listing ``agent_link_mailbox_inspect``) and CLI (``agent-link show --thread``,
:mod:`agent_link_conversations.thread_option`)."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_conversations.plugin": (
    "agent_link_register_commands",
    "agent_link_register_tools",
)}
