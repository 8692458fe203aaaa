"""agent-link loops plugin: the loop guard (:mod:`agent_link_loops.plugin`), which stops agents
from messaging each other (or themselves) without end, each message costing the recipient's
model a request."""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_loops.plugin": (
    "agent_link_before_store",
    "agent_link_register_settings",
)}

#: the settings each entry module registers, read without importing it (and registered by it
#: from here)
AGENT_LINK_SETTINGS = {"agent_link_loops.plugin": (
    {"name": "AGENT_LINK_REPEAT_WINDOW_MS", "kind": "int", "default": 60000, "minimum": 0, "maximum": 86_400_000,
     "doc": "a message identical to one the sender sent the same recipient this many ms ago is refused as a loop (0: allowed)"},
    {"name": "AGENT_LINK_PAIR_RATE", "kind": "int", "default": 8, "minimum": 0, "maximum": 10_000,
     "doc": "most messages two addresses may exchange (both ways) within AGENT_LINK_PAIR_WINDOW_MS; more is refused as a "
            "runaway exchange (0: no limit)"},
    {"name": "AGENT_LINK_PAIR_WINDOW_MS", "kind": "int", "default": 10000, "minimum": 1000, "maximum": 86_400_000,
     "doc": "the window AGENT_LINK_PAIR_RATE counts messages in, ms"},
)}
