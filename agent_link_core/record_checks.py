"""The checks of the records a plugin contributes through its ``register`` hooks (harnesses,
tools, settings, prompt hooks, panels, legacy importers), and of a harness's declared send
options: each refuses a bad record with :class:`~agent_link_core.boundary.Refused`, which
:class:`~agent_link_core.plugins.Hooks` reports as the plugin's problem.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

from agent_link_core.addresses import HARNESS_RE, MODULE_RE
from agent_link_core.boundary import Refused

TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SETTING_NAME_RE = re.compile(r"^AGENT_LINK_[A-Z0-9_]{1,64}$")
OPTION_NAME_RE = re.compile(r"^[a-z][A-Za-z0-9]{0,63}$")
ALIAS_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,80}$")


def check_harness(record: Any) -> None:
    """Refuse a harness that is not a :class:`~agent_link_core.harness.Harness` (or a
    :class:`~agent_link_core.harness.HarnessDeclaration` with a ``module:attribute`` target)
    with a valid name."""
    from agent_link_core.harness import Harness, HarnessDeclaration

    if not isinstance(record, (Harness, HarnessDeclaration)):
        raise Refused(f"registered a {type(record).__name__}, not a Harness", "Subclass agent_link_core.harness.Harness.")
    name = getattr(record, "name", None)
    if not isinstance(name, str) or not HARNESS_RE.match(name):
        raise Refused(f"registered a harness named {name!r}",
                      "A harness name is its address scheme: 1-32 of a-z 0-9 -, starting with a letter.")
    if isinstance(record, HarnessDeclaration):
        module, sep, attribute = record.target.partition(":") if isinstance(record.target, str) else ("", "", "")
        if not (module and sep and attribute):
            raise Refused(f"declared harness {name!r} with target {record.target!r}",
                          "Give the harness class as 'package.module:ClassName'.")
        return
    options: Any = getattr(record, "send_options", frozenset())
    if not isinstance(options, (set, frozenset)) or not all(isinstance(o, str) for o in options):
        raise Refused(f"harness {name!r} declares send_options that are not a set of strings",
                      "Set send_options = frozenset({'option', ...}).")
    named: Any = getattr(record, "caller_arguments", ())
    if not isinstance(named, tuple) or not all(isinstance(a, str) and len(a) > 1 and a.startswith("_") for a in named):
        raise Refused(f"harness {name!r} declares caller_arguments that are not a tuple of names starting with '_'",
                      "Set caller_arguments = ('_hostCaller', ...): names no tool uses as an argument.")


def check_send_declarations(harness: Any) -> None:
    """A harness's declared send options and result fields: names and JSON schemas.

    Checked when the tools are collected (``Hooks.tools``: the MCP server, ``agent-link
    plugins``, health), where they become part of ``message_agent``: a CLI command that lists
    no tools does not load jsonschema for them.

    :raises Refused: a declaration of the wrong type, a name the core uses, an invalid schema.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    from agent_link_core.harness import SendOption
    from agent_link_core.tools.core_tools import CORE_TOOLS

    base = next(spec for spec in CORE_TOOLS if spec.name == "message_agent")
    specs = getattr(harness, "send_option_specs", ())
    fields = getattr(harness, "send_result_fields", {})
    if not isinstance(specs, (tuple, list)) or not isinstance(fields, Mapping):
        raise Refused(f"harness {harness.name!r} declares send_option_specs or send_result_fields of the wrong type",
                      "send_option_specs is a tuple of SendOption; send_result_fields a dict of JSON schemas.")
    named: list[tuple[str, Any]] = []
    for option in specs:
        if not isinstance(option, SendOption) or not isinstance(option.name, str) or not OPTION_NAME_RE.match(option.name):
            raise Refused(f"harness {harness.name!r} declares a send option that is not a SendOption with a camelCase name",
                          "Declare SendOption('name', {json schema}).")
        if option.name in base.input_schema["properties"]:
            raise Refused(f"harness {harness.name!r} declares send option {option.name!r}, which is message_agent's own argument",
                          "Name the option something of your own.")
        named.append((f"send option {option.name!r}", option.schema))
    for field_name, schema in fields.items():
        if field_name in base.output_fields or field_name in ("ok", "error", "warnings"):
            raise Refused(f"harness {harness.name!r} declares result field {field_name!r}, which the core declares already",
                          "Name the field something of your own.")
        named.append((f"result field {field_name!r}", schema))
    for what, schema in named:
        try:
            if not isinstance(schema, Mapping):
                raise SchemaError("not an object")
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise Refused(f"harness {harness.name!r} declares {what} with an invalid JSON schema: {exc.message[:200]}",
                          "Fix the schema (JSON Schema draft 2020-12).") from None


def check_prompt_hook(record: Any) -> None:
    """Refuse a prompt-hook record that is not a :class:`~agent_link_core.records.PromptHook`
    with a harness name and a dotted module path."""
    from agent_link_core.records import PromptHook

    if not isinstance(record, PromptHook):
        raise Refused(f"registered a {type(record).__name__}, not a PromptHook", "Register agent_link_core.records.PromptHook records.")
    if not isinstance(record.harness, str) or not HARNESS_RE.match(record.harness):
        raise Refused(f"registered a prompt hook for harness {record.harness!r}",
                      "The harness is a harness name: 1-32 of a-z 0-9 -, starting with a letter.")
    if not isinstance(record.module, str) or not MODULE_RE.match(record.module):
        raise Refused(f"registered a prompt hook with module {record.module!r}", "The module is a dotted module path.")


def check_panel(record: Any) -> None:
    """Refuse a panel that is not a :class:`~agent_link_core.panels.Panel` with a title and a
    callable ``render``."""
    from agent_link_core.panels import PANEL_NAME_RE, Panel

    if not isinstance(record, Panel):
        raise Refused(f"registered a {type(record).__name__}, not a Panel", "Register agent_link_core.panels.Panel records.")
    if not isinstance(record.name, str) or not PANEL_NAME_RE.match(record.name):
        raise Refused(f"registered a panel named {record.name!r}", "Panel names are a-z 0-9 -, starting with a letter, at most 48.")
    if not isinstance(record.title, str) or not record.title.strip() or not callable(record.render):
        raise Refused(f"panel {record.name!r} has no title or a render that is not callable",
                      "A panel has a title and render(app) -> PanelView.")


def check_legacy_importer(record: Any) -> None:
    """Refuse a legacy importer that is not a :class:`~agent_link_core.legacy.LegacyImporter`
    with a lower-case name and an integer order."""
    from agent_link_core.legacy import LegacyImporter

    if not isinstance(record, LegacyImporter):
        raise Refused(f"registered a {type(record).__name__}, not a LegacyImporter",
                      "Subclass agent_link_core.legacy.LegacyImporter.")
    if not isinstance(record.name, str) or not HARNESS_RE.match(record.name):
        raise Refused(f"registered a legacy importer named {record.name!r}",
                      "Importer names are 1-32 of a-z 0-9 -, starting with a letter.")
    if not isinstance(record.order, int) or isinstance(record.order, bool):
        raise Refused(f"legacy importer {record.name!r} has order {record.order!r}", "The order is an integer.")


def check_tool(record: Any) -> None:
    """Refuse a tool that is not a well-formed :class:`~agent_link_core.tools.registry.ToolSpec`
    (name, async handler, input and output schemas valid against the JSON Schema meta-schema)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    from agent_link_core.tools.registry import ToolSpec, output_schema

    if not isinstance(record, ToolSpec):
        raise Refused(f"registered a {type(record).__name__}, not a ToolSpec", "Register agent_link_core.tools.registry.ToolSpec records.")
    if not isinstance(record.name, str) or not TOOL_NAME_RE.match(record.name):
        raise Refused(f"registered a tool named {record.name!r}", "Tool names are snake_case: a-z 0-9 _, starting with a letter, at most 64.")
    if not isinstance(record.description, str) or not record.description.strip():
        raise Refused(f"tool {record.name!r} has no description", "Describe what the tool does; models read it.")
    handler = record.handler
    if not callable(handler) or not (inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)):
        raise Refused(f"tool {record.name!r} has a handler that is not an async function",
                      "The handler is `async def handler(app, arguments, call) -> dict`.")
    if not isinstance(record.input_schema, Mapping) or record.input_schema.get("type") != "object":
        raise Refused(f"tool {record.name!r} has an input schema that is not a JSON schema of type object",
                      "input_schema must be {'type': 'object', 'properties': {...}, 'additionalProperties': False}.")
    if not isinstance(record.output_fields, Mapping) or not all(isinstance(v, Mapping) for v in record.output_fields.values()):
        raise Refused(f"tool {record.name!r} has output_fields that are not a dict of JSON schemas",
                      "output_fields maps each success field to its JSON schema.")
    for which, schema in (("input", record.input_schema), ("output", output_schema(record))):
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise Refused(f"tool {record.name!r} has an invalid {which} schema at {where}: {exc.message[:200]}",
                          "Fix the schema (it is checked against JSON Schema draft 2020-12).") from None


def check_setting(record: Any, core_names: frozenset[str]) -> None:
    """Refuse a setting that is not a :class:`~agent_link_core.config.Setting`, is badly named,
    or would shadow one of the core's settings (its name or an alias)."""
    from agent_link_core.config import Setting

    if not isinstance(record, Setting):
        raise Refused(f"registered a {type(record).__name__}, not a Setting", "Register agent_link_core.config.Setting records.")
    if not isinstance(record.name, str) or not SETTING_NAME_RE.match(record.name):
        raise Refused(f"registered a setting named {record.name!r}", "Setting names are AGENT_LINK_ followed by A-Z 0-9 _.")
    if record.name in core_names:
        raise Refused(f"registered {record.name}, which is the core's own setting",
                      "A plugin cannot redefine a core setting; name yours AGENT_LINK_<PLUGIN>_...")
    for alias in record.aliases:
        if not isinstance(alias, str) or not ALIAS_NAME_RE.match(alias):
            raise Refused(f"setting {record.name} has an alias {alias!r} that is not an environment variable name",
                          "Aliases are upper-case variable names.")
        if alias in core_names:
            raise Refused(f"setting {record.name} takes {alias} as an alias, which is the core's own setting",
                          "A plugin cannot read a core setting as its own.")
