"""The MCP tool layer: tool records, argument validation, the core tools."""
