"""What the host plugins (codex, claude, opencode, a third party's) share: registering
agent-link with a host through its CLI (:mod:`agent_link_hostkit.host_install`) and the
process facts a harness needs to tie a caller to a host session
(:mod:`agent_link_hostkit.procs`). A library the host plugins depend on, not a plugin: it
has no entry point and no hooks, and the core never imports it."""
