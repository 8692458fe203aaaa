"""agent-link harness for opencode (https://opencode.ai): sessions of running ``opencode serve``
servers, found through their HTTP API (see :mod:`agent_link_opencode.harness`)."""
