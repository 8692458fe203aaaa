"""agent-link codex plugin (distribution `agent-link-codex`)."""
