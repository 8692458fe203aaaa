"""agent-link receipts plugin (distribution `agent-link-receipts`)."""
