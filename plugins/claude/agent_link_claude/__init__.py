"""agent-link claude plugin (distribution `agent-link-claude`)."""
