"""agent-link codex plugin (distribution `agent-link-codex`)."""

#: the hooks this plugin calls and others implement (docs/plugins.md, section 3), by the module specifying them;
#: imported when one of them is first called
AGENT_LINK_HOOKSPECS = {"agent_link_codex.hookspecs": ("agent_link_check_override",)}

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_codex.plugin": (
    "agent_link_before_send",
    "agent_link_extend_tools",
    "agent_link_health",
    "agent_link_on_event",
    "agent_link_record_event",
    "agent_link_register_commands",
    "agent_link_register_harnesses",
    "agent_link_register_prompt_hooks",
    "agent_link_register_settings",
    "agent_link_register_tools",
    "agent_link_resolve_address",
    "agent_link_schema",
    "agent_link_server_tasks",
    "agent_link_tool_send",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_codex.plugin": (
    {"name": "AGENT_LINK_CODEX_URL", "kind": "str", "aliases": ("CODEX_AGENT_LINK_URL", "CODEX_APP_SERVER_URL"),
     "doc": "WebSocket URL of a Codex app-server to use (ws://127.0.0.1:<port>/)"},
    {"name": "AGENT_LINK_CODEX_SOCK", "kind": "str", "aliases": ("CODEX_AGENT_LINK_SOCK", "CODEX_APP_SERVER_SOCK"),
     "doc": "Unix socket of a Codex app-server to use (codex app-server --listen unix://PATH)"},
    {"name": "AGENT_LINK_CODEX_EXTRA_SOCK", "kind": "str", "aliases": ("CODEX_APP_SERVER_SOCKET",),
     "doc": "one more app-server Unix socket to use besides the others, never registered (CODEX_APP_SERVER_SOCKET is agent-session-intercom's name for it)"},
    {"name": "AGENT_LINK_CODEX_SOURCE_ENDPOINT", "kind": "str", "aliases": ("AGENT_SESSION_INTERCOM_SOURCE_ENDPOINT",),
     "doc": "the endpoint id (ep_...) whose thread CODEX_THREAD_ID names, when several app-servers know it"},
    {"name": "AGENT_LINK_CODEX_TOKEN_FILE", "kind": "path",
     "doc": "file holding the capability token for AGENT_LINK_CODEX_URL (--ws-auth capability-token)"},
    {"name": "AGENT_LINK_CODEX_AUTOSTART", "kind": "flag", "default": True, "aliases": ("CODEX_AGENT_LINK_AUTOSTART",),
     "doc": "start a private Codex app-server when none is reachable"},
    {"name": "AGENT_LINK_CODEX_BIN", "kind": "str", "aliases": ("CODEX_AGENT_LINK_CODEX_BIN", "CODEX_BIN"),
     "doc": "the codex program (name on PATH or path); found on PATH and in the usual places when unset"},
    {"name": "AGENT_LINK_CODEX_APP_SERVER_BIN", "kind": "str", "aliases": ("CODEX_AGENT_LINK_APP_SERVER_BIN", "CODEX_APP_SERVER_BIN"),
     "doc": "a program run as '<bin> --listen ...' instead of 'codex app-server --listen ...'"},
    {"name": "AGENT_LINK_CODEX_TRANSPORT", "kind": "choice", "default": "unix", "aliases": ("CODEX_AGENT_LINK_APP_SERVER_TRANSPORT",), "choices": ("unix", "ws-token"),
     "doc": "how the private app-server listens: unix socket or token-protected loopback WebSocket"},
    {"name": "AGENT_LINK_CODEX_IDLE_MS", "kind": "int", "default": 300000, "aliases": ("CODEX_AGENT_LINK_APP_SERVER_IDLE_MS",), "minimum": 0,
     "maximum": 86400000, "doc": "stop the private app-server after this many ms without requests (0 = never; at most 86400000, a day)"},
    {"name": "AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS", "kind": "int", "default": 15000, "aliases": ("CODEX_AGENT_LINK_APP_SERVER_STARTUP_MS",), "minimum": 500, "maximum": 120000,
     "doc": "how long the private app-server may take to start, in ms"},
    {"name": "AGENT_LINK_MANAGED_DIR", "kind": "path", "aliases": ("CODEX_AGENT_LINK_STATE_DIR",),
     "doc": "records and sockets of private app-servers (default <state>/managed-app-servers)"},
    {"name": "AGENT_LINK_CODEX_REMOTE_TOKENS", "kind": "flag", "default": False,
     "doc": "allow sending an endpoint's token to a wss:// app-server on another host (never over ws://)"},
    {"name": "AGENT_LINK_CODEX_REMINDERS", "kind": "flag", "default": True,
     "doc": "remind idle Codex threads of unresolved mail with a turn"},
    {"name": "AGENT_LINK_CODEX_DESKTOP_PUSH", "kind": "choice", "default": "mailbox-only", "choices": ("mailbox-only", "shared-daemon"),
     "doc": "threads held by another app-server get mail only (mailbox-only), or turns too (shared-daemon, needs an explicit endpoint)"},
    {"name": "AGENT_LINK_CODEX_MCP_SERVER", "kind": "str",
     "doc": "the name agent-link's MCP server has in Codex's config (a turn agent-link starts waits for it to be ready); default: codex-agent-link (the plugin's key) and agent-link (a hand-written entry)"},
    {"name": "AGENT_LINK_CODEX_MCP_READY_MS", "kind": "int", "default": 20000, "minimum": 0, "maximum": 120000,
     "doc": "how long, in ms, a turn agent-link starts waits for agent-link's MCP server to finish starting on the thread"},
    {"name": "AGENT_LINK_GUI_OPEN_DRY_RUN", "kind": "flag", "default": False,
     "doc": "launch_codex_thread openInGui: do not actually open the app"},
)}

#: the migrations (owner: versions) each entry module returns; their SQL is imported only
#: when a database lacks one of them
AGENT_LINK_SCHEMA = {"agent_link_codex.plugin": {"codex": (1, 2, 3)}}

#: the harnesses each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HARNESSES = {"agent_link_codex.plugin": (
    {"name": "codex", "target": "agent_link_codex.harness:CodexHarness", "session_kind": "codex_thread",
     "host_variables": ("CODEX_THREAD_ID",), "host_priority": 20, "caller_variables": ("CODEX_THREAD_ID",),
     "sender_options": (
         {"flag": "--from-thread", "key": "threadId", "help": "Act as this Codex thread (unverified), when not inside one."},
         {"flag": "--from-endpoint", "key": "endpointId", "help": "The Codex app-server endpoint of --from-thread, when several know it.",
          "requires": "--from-thread"},
     )},
)}
