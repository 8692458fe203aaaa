"""agent-link-filehost: an example harness plugin (see README.md and docs/plugins.md)."""
