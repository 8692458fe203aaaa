"""agent-link web plugin (distribution ``agent-link-web``): ``agent-link web``, a loopback,
token-protected live page where a person watches and answers the agents' mail.

* :mod:`agent_link_web.plugin`: the hooks (command, settings, the person marker on messages
  the page sends, the envelope's notice and ``<origin />``);
* :mod:`agent_link_web.server`: the Starlette application, its guards and the event stream;
* :mod:`agent_link_web.views`: what each section shows, from the core's public API;
* :mod:`agent_link_web.cli`: the command; :mod:`agent_link_web.context`: shared pieces.
"""

#: the hooks this plugin calls and others implement (docs/plugins.md, section 3), by the module specifying them;
#: imported when one of them is first called
AGENT_LINK_HOOKSPECS = {"agent_link_web.hookspecs": ("agent_link_register_panels",)}

#: the hooks each entry module implements, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_HOOKS = {"agent_link_web.plugin": (
    "agent_link_before_send",
    "agent_link_register_commands",
    "agent_link_register_settings",
    "agent_link_render_envelopes",
)}

#: the settings each entry module registers, read without importing it (docs/plugins.md,
#: "Declare now, import when used"); tests/test_declared_hooks.py checks them against the code
AGENT_LINK_SETTINGS = {"agent_link_web.plugin": (
    {"name": "AGENT_LINK_WEB_USER", "kind": "str",
     "doc": "the person's name on the web page (user:<name>); default: the login name"},
    {"name": "AGENT_LINK_WEB_ACT_FOR", "kind": "str",
     "doc": "agents (addresses or patterns such as team:*, comma separated) whose mail the person may decline or mark done on the page; default none"},
)}
