"""agent-link across machines through a NATS JetStream server (README.md)."""
