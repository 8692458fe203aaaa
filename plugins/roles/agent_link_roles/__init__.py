"""agent-link roles plugin (distribution `agent-link-roles`)."""
