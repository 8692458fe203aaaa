"""agent-link presence plugin (distribution ``agent-link-presence``).

Which plain addresses (``AGENT_LINK_ADDRESS``, which no harness lists) a process has served (an
``agent-link mcp`` with its pid, an inbox read) and when. A send to an address nobody ever served is
flagged with the closest known ones (a typo's fix), ``requireKnown`` refuses it, and the live ones
are listed as sessions, so two MCP clients without a host plugin can find each other.

* :mod:`agent_link_presence.table`: the ``presence`` table, records, live sessions, suggestions;
* :mod:`agent_link_presence.startup`: the record ``agent-link mcp`` makes before its start-up front
  answers (entry-point group ``agent_link_mcp_start``);
* :mod:`agent_link_presence.plugin`: the hooks.

This module stays standard library only: plugins read :data:`RECENT_MS` and :func:`pid_alive` from it.
"""

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_presence.plugin": (
    "agent_link_check_recipient",
    "agent_link_inbox_read",
    "agent_link_present_sessions",
    "agent_link_schema",
    "agent_link_server_tasks",
    "agent_link_suggest_addresses",
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_presence.plugin": {"presence": (1,)}}

#: an address read by a short-lived process (a CLI inbox read) counts as live this long (ms)
RECENT_MS = 10 * 60_000


def pid_alive(pid: int) -> bool:
    """True when ``pid`` runs: a zombie does not, a process of another user does, a pid of 0 or below never does. The one
    copy of this check (host plugins reach it through plugins/hostkit); psutil is imported here, off the hook fast path."""
    import psutil

    try:
        return pid > 0 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False
