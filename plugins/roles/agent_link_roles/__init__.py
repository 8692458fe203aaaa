"""agent-link roles plugin (distribution ``agent-link-roles``).

Lets the user give a session a role (``router``, ``builder``...) so other sessions can write to
``role:<name>`` instead of a session address. Pieces:

* :mod:`agent_link_roles.table`: the hand-editable ``<state>/roles.json`` (holders,
  enforcement mode, override policy), validated on every read, written atomically under a lock;
* :mod:`agent_link_roles.procedures`: ``<state>/roles/<name>.md`` procedure files, versioned by
  SHA-256, shown once per version to each holder;
* :mod:`agent_link_roles.handover`: open reply/action mail sent to a role follows the role;
* :mod:`agent_link_roles.enforcement`: off / warn / enforce for direct coordination;
* :mod:`agent_link_roles.policy`: who may change an existing thread's model, effort or cwd;
* :mod:`agent_link_roles.tools`: the six MCP tools; :mod:`agent_link_roles.plugin`: the hooks.
"""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_roles.plugin": (
    "agent_link_before_send",
    "agent_link_check_override",
    "agent_link_health",
    "agent_link_on_event",
    "agent_link_register_legacy_importers",
    "agent_link_register_panels",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_render_envelopes",
    "agent_link_resolve_address",
    "agent_link_schema",
    "agent_link_session_roles",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_roles.plugin": (
    {"name": "AGENT_LINK_ROLE_ADMIN", "kind": "flag", "default": False,
     "doc": "allow set_agent_role, clear_agent_role and set_agent_override_policy (read once at server start)"},
    {"name": "AGENT_LINK_ROLE_ENFORCEMENT", "kind": "choice", "choices": ("off", "warn", "enforce"),
     "doc": "direct coordination between role holders: off, warn or enforce (overrides roles.json)"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_roles.plugin": {"roles": (1,)}}
