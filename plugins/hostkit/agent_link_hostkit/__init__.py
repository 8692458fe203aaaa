"""What the host plugins (codex, claude, opencode, a third party's) share: registering
agent-link with a host through its CLI (:mod:`agent_link_hostkit.host_install`) and the
process facts a harness needs to tie a caller to a host session
(:mod:`agent_link_hostkit.procs`), caller context read from a tool call's ``_meta``
(:mod:`agent_link_hostkit.callmeta`), a session title that is an envelope shown by sender and
first words (:mod:`agent_link_hostkit.titles`), when each prompt hook last ran
(:mod:`agent_link_hostkit.hook_runs`), and the start-up front and stdio transport of
``agent-link mcp`` that hosts' behaviour asks for (:mod:`agent_link_hostkit.fastfront`,
:mod:`agent_link_hostkit.stdio_transport`). A library the host plugins depend on, not a
plugin: no hooks and no ``agent_link`` entry point; the core imports none of it, and finds the
front through the ``agent_link_mcp_front`` entry point (:mod:`agent_link_hostkit.front`)."""
