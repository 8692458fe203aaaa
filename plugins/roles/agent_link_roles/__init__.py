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
