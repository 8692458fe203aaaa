"""agent-link leases plugin (distribution ``agent-link-leases``).

Agents claim the files they are about to edit (files, directories or globs under a project
root); a claim that overlaps another session's lease is refused whole, naming every holder.

* :mod:`agent_link_leases.patterns`: patterns and the exact overlap rule;
* :mod:`agent_link_leases.store`: the ``leases`` table, claims, releases, listings;
* :mod:`agent_link_leases.tools`: the MCP tools; :mod:`agent_link_leases.cli`: the commands;
* :mod:`agent_link_leases.plugin`: the hooks.
"""
