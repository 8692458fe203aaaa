"""``agent-link install opencode`` and ``agent-link uninstall opencode``: agent-link's MCP server
and its opencode plugin written into, and removed again from, the user's opencode config.

opencode has no command for adding either, so this edits a config file: the one given with
``--config``, else ``$OPENCODE_CONFIG`` when set, else the global file whose ``plugin`` list
opencode uses (:func:`config_path`). opencode reads ``config.json``, ``opencode.json`` and
``opencode.jsonc`` of ``$XDG_CONFIG_HOME/opencode`` (default ``~/.config/opencode``) in that
order and merges them key by key, a later file's list replacing an earlier one's (checked with
``opencode debug config`` 1.18.33), so a ``plugin`` list in ``opencode.jsonc`` hides the one in
``opencode.json``. Install

* checks the config first (before anything is written, and the same for ``--dry-run``): a file
  with comments or trailing commas (JSONC), one that is not valid JSON, or one whose ``mcp``
  is not an object or ``plugin`` not a list is refused, never rewritten, with the entries to
  add by hand;
* writes the JS plugin this package ships (``host_plugin/agent-link.js``: it names the calling
  session in each call of agent-link's tools, :mod:`agent_link_opencode.proof`; refuses edits of
  paths another session leased; adds the mail note) to
  ``~/.local/share/agent-link/host-plugins/opencode/`` (:func:`agent_link_hostkit.host_install.plugin_dir`),
  naming this installation's ``agent-link`` for the hooks it runs, and records there which
  config it edited and what that file held before (:data:`RECORD`, private);
* sets ``mcp["agent-link"]`` to a local server running this installation's ``agent-link mcp``
  with ``AGENT_LINK_HOST=opencode``, and adds that file's URL to the ``plugin`` list (after
  removing earlier agent-link entries, so running it again changes nothing). The file is
  written through a symlink to its target, the entries spliced into its text as written
  (:mod:`agent_link_opencode.jsonedit`; rewritten whole in its layout when that cannot be done).

Uninstall removes exactly those two entries (and the ``mcp`` table or ``plugin`` list when they
held nothing else); every other key of the file stays as it was. When nothing else changed since
install, the file gets back its exact bytes (or is removed, when install created it). The
shared folder goes only when no config agent-link installed into (nor opencode's global files)
still lists the plugin.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from agent_link_core.errors import AgentLinkError
from agent_link_core.json_files import ensure_private_dir
from agent_link_hostkit import host_install, jsonc
from agent_link_hostkit.host_install import Step

from agent_link_opencode import jsonedit

SOURCE = Path(__file__).with_name("host_plugin") / "agent-link.js"
#: the MCP server's name in opencode's config (opencode names its tools ``agent-link_<tool>``,
#: which the JS plugin recognises)
SERVER_NAME = "agent-link"
PLUGIN_FILE = "agent-link.js"
#: opencode's global config files, in the order it merges them (a later one's keys win)
GLOBAL_FILES = ("config.json", "opencode.json", "opencode.jsonc")
#: the record of the configs install wrote into, in the shared plugin folder: ``{"configs":
#: {absolute path: {"original": text before install or null (install created the file),
#: "written": sha256 of what install wrote}}}``; private (a config may hold API keys)
RECORD = "installs.json"


def global_dir(env: Mapping[str, str] | None = None) -> Path:
    """opencode's global config folder: ``$XDG_CONFIG_HOME/opencode`` (default ``~/.config``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "opencode"


@dataclass
class ConfigFile:
    """One config file as read: ``text`` None when it does not exist; ``data`` the object it
    holds (read as opencode reads it, comments allowed) or None; ``problem`` why agent-link
    will not rewrite it (None: plain JSON holding an object, or absent)."""

    path: Path
    text: str | None
    data: dict[str, Any] | None
    problem: str | None


def _strip_jsonc(text: str) -> tuple[str, str | None]:
    """``text`` without a leading byte order mark, its comments and trailing commas blanked
    (:func:`agent_link_hostkit.jsonc.strip`), and where the first of them is (None: plain JSON).

    :raises ValueError: a block comment that is never closed.
    """
    text = text.removeprefix("\ufeff")  # opencode drops a leading byte order mark too
    plain = jsonc.strip(text)
    first = next((i for i, (a, b) in enumerate(zip(text, plain)) if a != b), None)
    if first is None:
        return text, None
    line = text.count("\n", 0, first) + 1
    column = first - (text.rfind("\n", 0, first) + 1) + 1
    return plain, f"line {line}, column {column}"


def read_file(path: Path) -> ConfigFile:
    """``path`` read as opencode reads a config (JSONC), with what keeps agent-link from
    rewriting it (:class:`ConfigFile`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConfigFile(path, None, None, None)
    except UnicodeDecodeError:
        return ConfigFile(path, "", None, "is not UTF-8 text")
    except OSError as exc:
        return ConfigFile(path, "", None, f"cannot be read ({exc.strerror or exc})")
    if not text.strip():
        return ConfigFile(path, text, {}, None)
    try:
        plain, extension = _strip_jsonc(text)
        data = json.loads(plain)
    except json.JSONDecodeError as exc:
        return ConfigFile(path, text, None, f"is not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        return ConfigFile(path, text, None, "is nested too deeply to read")
    except ValueError as exc:
        return ConfigFile(path, text, None, f"is not valid JSON ({exc})")
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        return ConfigFile(path, text, None, f"holds {kind}, not a JSON object")
    if extension is not None:
        return ConfigFile(path, text, data, f"has comments or trailing commas (JSONC, first at {extension}), "
                                            "which agent-link does not rewrite")
    return ConfigFile(path, text, data, None)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file install edits: ``$OPENCODE_CONFIG`` when set, else the global file whose
    ``plugin`` list opencode uses: from ``opencode.jsonc`` down, the first that is unreadable
    (so install refuses it) or has a ``plugin`` key; when none has one, the last existing file;
    when none exists, ``opencode.json``."""
    env = os.environ if env is None else env
    if env.get("OPENCODE_CONFIG"):
        return Path(env["OPENCODE_CONFIG"])
    folder = global_dir(env)
    existing = [f for f in (read_file(folder / name) for name in reversed(GLOBAL_FILES)) if f.text is not None]
    for found in existing:
        if found.data is None or "plugin" in found.data:
            return found.path
    return existing[0].path if existing else folder / "opencode.json"


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """opencode's merge of two config files: objects key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def effective_config(env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """What opencode's config holds from its global files and ``$OPENCODE_CONFIG`` (whose
    ``plugin`` list adds to the global one), and the files read. A project's own config (in the
    folder opencode starts in) is not read: its ``plugin`` list adds to these, it removes none."""
    env = os.environ if env is None else env
    merged: dict[str, Any] = {}
    read: list[Path] = []
    for name in GLOBAL_FILES:
        found = read_file(global_dir(env) / name)
        if found.text is not None:
            read.append(found.path)
        merged = _merge(merged, found.data or {})
    if env.get("OPENCODE_CONFIG"):
        found = read_file(Path(env["OPENCODE_CONFIG"]))
        if found.text is not None:
            read.append(found.path)
        extra = found.data or {}
        plugins = [*_as_list(merged.get("plugin")), *_as_list(extra.get("plugin"))]
        merged = _merge(merged, extra)
        if plugins:
            merged["plugin"] = plugins
    return merged, read


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ours(entry: Any) -> bool:
    """A ``plugin`` list entry that is agent-link's (any installation's copy)."""
    return isinstance(entry, str) and entry.endswith(f"/agent-link/host-plugins/opencode/{PLUGIN_FILE}")


def _has_ours(config: dict[str, Any] | None) -> bool:
    if not config:
        return False
    mcp = config.get("mcp")
    return (isinstance(mcp, dict) and SERVER_NAME in mcp) or any(_ours(p) for p in _as_list(config.get("plugin")))


def server_entry(executable: Path) -> dict[str, Any]:
    """agent-link's ``mcp`` entry."""
    return {"type": "local", "command": [str(executable), "mcp"], "environment": {"AGENT_LINK_HOST": "opencode"}, "enabled": True}


def with_agent_link(config: dict[str, Any], executable: Path, plugin_file: Path) -> dict[str, Any]:
    """``config`` with agent-link's MCP server and plugin entries (the others untouched)."""
    out = dict(config)
    mcp = dict(out.get("mcp") or {})
    mcp[SERVER_NAME] = server_entry(executable)
    out["mcp"] = mcp
    plugins = [p for p in out.get("plugin") or [] if not _ours(p)]
    out["plugin"] = [*plugins, plugin_file.as_uri()]
    return out


def without_agent_link(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without agent-link's entries; an ``mcp`` table or ``plugin`` list left empty
    by that is dropped."""
    out = dict(config)
    if isinstance(out.get("mcp"), dict) and SERVER_NAME in out["mcp"]:
        mcp = {k: v for k, v in out["mcp"].items() if k != SERVER_NAME}
        if mcp:
            out["mcp"] = mcp
        else:
            del out["mcp"]
    if isinstance(out.get("plugin"), list) and any(_ours(p) for p in out["plugin"]):
        plugins = [p for p in out["plugin"] if not _ours(p)]
        if plugins:
            out["plugin"] = plugins
        else:
            del out["plugin"]
    return out


def by_hand(executable: Path, plugin_file: Path) -> str:
    """The entries to add by hand, as one line."""
    return (f'add "{SERVER_NAME}": {json.dumps(server_entry(executable))} to its "mcp" object and '
            f'{json.dumps(plugin_file.as_uri())} to its "plugin" list')


def check_install(found: ConfigFile, executable: Path, plugin_file: Path) -> None:
    """Refuse a config install would not rewrite (module docstring).

    :raises AgentLinkError: ``invalid_arguments`` naming the file, why, and the entries to add by hand.
    """
    config = found.data or {}
    problem = found.problem
    if problem is None and ("mcp" in config and not isinstance(config["mcp"], dict)
                            or "plugin" in config and not isinstance(config["plugin"], list)):
        problem = "has an `mcp` that is not an object or a `plugin` that is not a list (opencode refuses that too)"
    if problem is not None:
        entries = by_hand(executable, plugin_file)
        hint = (f"{entries[0].upper()}{entries[1:]} yourself, or remove the comments and run this again."
                if "JSONC" in problem else f"Fix it, then run this again; or {entries} yourself.")
        raise AgentLinkError("invalid_arguments", f"{found.path} {problem}; nothing was changed.", {"path": str(found.path)},
                             hint=hint)


def render(config: dict[str, Any], like: str | None) -> str:
    """``config`` as JSON formatted like the text ``like`` (its byte order mark, indentation and
    separators, its final line break; 2 spaces for a new file)."""
    if like is None or not like.strip():
        return json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    bom = "\ufeff" if like.startswith("\ufeff") else ""
    return bom + jsonedit.dump(config, jsonedit.style(like)) + like[len(like.rstrip()):]


def _spliced(text: str, *, server: dict[str, Any] | None, plugin: str | None) -> str:
    """``text`` (plain JSON) with agent-link's entries taken out of ``mcp`` and ``plugin`` and,
    when given, ``server`` and ``plugin`` put back, each edit spliced in (:mod:`jsonedit`)."""
    how = jsonedit.style(text)
    at = jsonedit.top(text)
    found = jsonedit.member(text, at, "mcp")
    if found is not None and text[found[1].value] == "{":
        ours = jsonedit.member(text, found[1].value, SERVER_NAME)
        if ours is not None and server is not None:
            text = jsonedit.replace(text, ours[1], server, how)
        elif ours is not None:
            only = len(jsonedit.spans(text, found[1].value)[0]) == 1
            text = jsonedit.remove(text, at, found[0]) if only else jsonedit.remove(text, found[1].value, ours[0])
        elif server is not None:
            text = jsonedit.append(text, found[1].value, SERVER_NAME, server, how)
    elif server is not None:
        text = jsonedit.append(text, at, "mcp", {SERVER_NAME: server}, how)
    while (found := jsonedit.member(text, at, "plugin")) is not None and text[found[1].value] == "[":
        items, _ = jsonedit.spans(text, found[1].value)
        mine = [n for n, item in enumerate(items) if _ours(json.loads(text[item.value:item.end]))]
        if not mine:
            break
        if plugin is not None and mine == [len(items) - 1]:  # already last: replaced where it is
            return jsonedit.replace(text, items[-1], plugin, how)
        text = (jsonedit.remove(text, at, found[0]) if len(items) == 1 and plugin is None
                else jsonedit.remove(text, found[1].value, mine[0]))
    if plugin is not None:
        found = jsonedit.member(text, at, "plugin")
        text = (jsonedit.append(text, found[1].value, None, plugin, how) if found is not None
                else jsonedit.append(text, at, "plugin", [plugin], how))
    return text


def edited(found: ConfigFile, want: dict[str, Any], *, server: dict[str, Any] | None, plugin: str | None) -> str:
    """The new text of ``found`` holding ``want``: spliced into the file as it was written when
    that gives exactly ``want`` (:func:`_spliced`), else the whole object in the file's layout."""
    if found.text and found.text.strip() and found.data:
        try:
            text = _spliced(found.text, server=server, plugin=plugin)
            if _parse(text) == want:
                return text
        except (ValueError, IndexError, KeyError, RecursionError):
            pass
    return render(want, found.text)


def _write_error(path: Path, exc: OSError, what: str) -> AgentLinkError:
    denied = exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    return AgentLinkError("permission_denied" if denied else "invalid_arguments",
                          f"cannot write {path}: {exc.strerror or exc}; nothing was changed there.",
                          {"path": str(path), "errno": exc.errno, "reason": "file system"},
                          hint=f"Make it (and its folder) writable and run this again, or {what} yourself.")


def write_text(path: Path, text: str, what: str, *, mode: int | None = None) -> None:
    """Replace the file ``path`` (a symlink's target) with ``text`` atomically, with ``mode``
    (default: the file's own; 0600 for a new file).

    :raises AgentLinkError: when it cannot be written (``what``: the by-hand way), the temp file removed.
    """
    real = path.resolve()
    tmp = real.with_name(f".{real.name}.agent-link-{os.getpid()}")
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        if mode is None and real.exists():
            shutil.copymode(real, tmp)
        else:
            os.chmod(tmp, 0o600 if mode is None else mode)
        os.replace(tmp, real)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise _write_error(path, exc, what) from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _key(path: Path) -> str:
    return os.path.abspath(path)


def read_record(folder: Path) -> dict[str, dict[str, Any]]:
    """The configs install wrote into (:data:`RECORD`); ``{}`` when absent or unreadable."""
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    configs = data.get("configs") if isinstance(data, dict) else None
    return {k: v for k, v in configs.items() if isinstance(v, dict)} if isinstance(configs, dict) else {}


def write_record(folder: Path, configs: dict[str, dict[str, Any]]) -> None:
    """Store :data:`RECORD` (mode 0600).

    :raises AgentLinkError: when it cannot be written.
    """
    write_text(folder / RECORD, json.dumps({"configs": configs}, indent=2), "remove the file", mode=0o600)


#: the line of the JS plugin naming the agent-link command it runs (its hooks)
EXECUTABLE_LINE = 'const AGENT_LINK = "agent-link";'


def stage_plugin(plugin_file: Path, executable: Path) -> None:
    """Write the JS plugin to ``plugin_file`` running ``executable`` for its hooks (the file
    ships running ``agent-link`` from ``PATH``, which opencode's environment may not have).

    :raises AgentLinkError: when it cannot be written.
    """
    text = SOURCE.read_text(encoding="utf-8")
    if EXECUTABLE_LINE not in text:  # the packaged file and this module disagree: a packaging bug
        raise RuntimeError(f"{SOURCE} lacks the line {EXECUTABLE_LINE!r}")
    text = text.replace(EXECUTABLE_LINE, f"const AGENT_LINK = {json.dumps(str(executable))};", 1)
    ensure_private_dir(plugin_file.parent)  # the folders agent-link creates are private, the file too
    write_text(plugin_file, text, "check the folder's permissions", mode=0o600)


def install_steps(path: Path, folder: Path, executable: Path) -> list[Step]:
    """What ``agent-link install opencode`` does, in order (module docstring).

    :raises AgentLinkError: for a config it would not rewrite (:func:`check_install`), before anything is written.
    """
    plugin_file = folder / PLUGIN_FILE
    check_install(read_file(path), executable, plugin_file)
    folder_was_there = folder.exists()

    def edit() -> None:
        found = read_file(path)
        check_install(found, executable, plugin_file)
        config = found.data or {}
        updated = with_agent_link(config, executable, plugin_file)
        records = read_record(folder)
        entry = records.get(_key(path), {})
        if found.text is not None and updated == config:
            if _key(path) not in records:  # installed before the record was kept: known from now on
                records[_key(path)] = {"written": _digest(found.text)}
                write_record(folder, records)
            return
        if not _has_ours(config):  # the file as it is without agent-link, for uninstall
            entry = {"original": found.text}
        elif "original" not in entry:  # agent-link's entries came some other way: what was before is unknown
            entry = {}
        text = edited(found, updated, server=server_entry(executable), plugin=plugin_file.as_uri())
        records[_key(path)] = {**entry, "written": _digest(text)}
        try:
            write_record(folder, records)
            write_text(path, text, by_hand(executable, plugin_file))
        except AgentLinkError:
            if not folder_was_there:
                host_install.remove_folder(folder)
            raise

    return [Step(f"write agent-link's opencode plugin (running {executable}) to {plugin_file}",
                 action=lambda: stage_plugin(plugin_file, executable)),
            Step(f"add the MCP server {SERVER_NAME!r} ({executable} mcp) and {plugin_file.as_uri()} to {path}", action=edit)]


def restored(found: ConfigFile, entry: dict[str, Any]) -> str | None:
    """What uninstall writes back: the text install found, when nothing but agent-link's entries
    (and a ``$schema`` opencode adds) changed since; ``""`` to remove a file install created;
    None to rewrite the file without agent-link's entries."""
    if "original" not in entry or found.data is None:
        return None
    now = without_agent_link(found.data)
    original = entry["original"]
    if original is None:
        return "" if set(now) <= {"$schema"} and not found.path.is_symlink() else None
    before = _parse(str(original))
    if before is None:
        return None
    if now == before:
        return str(original)
    schema = now.get("$schema")
    if before and "$schema" not in before and {k: v for k, v in now.items() if k != "$schema"} == before:
        start = original.index("{") + 1  # where opencode puts the `$schema` it adds
        return f'{original[:start]}\n  "$schema": {json.dumps(schema)},{original[start:]}'
    return None


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(_strip_jsonc(text)[0]) if text.strip() else {}
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def users(folder: Path, path: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """The configs other than ``path`` that list this folder's plugin: those install recorded,
    and opencode's global files and ``$OPENCODE_CONFIG``."""
    uri = (folder / PLUGIN_FILE).as_uri()
    env = os.environ if env is None else env
    candidates = [*read_record(folder), *(_key(global_dir(env) / name) for name in GLOBAL_FILES)]
    if env.get("OPENCODE_CONFIG"):
        candidates.append(_key(Path(env["OPENCODE_CONFIG"])))
    found: list[str] = []
    for key in dict.fromkeys(candidates):
        if key == _key(path) or key in found:
            continue
        data = read_file(Path(key)).data or {}
        if uri in _as_list(data.get("plugin")):
            found.append(key)
    return found


def uninstall_steps(path: Path, folder: Path) -> list[Step]:
    """What ``agent-link uninstall opencode`` does, in order (module docstring).

    :raises AgentLinkError: for a config holding agent-link's entries that it would not rewrite
        (comments, invalid JSON), before anything is changed.
    """
    plugin_file = folder / PLUGIN_FILE
    remove_by_hand = f'remove "{SERVER_NAME}" from its "mcp" object and {json.dumps(plugin_file.as_uri())} from its "plugin" list'
    first = read_file(path)
    if first.problem is not None and (first.data is None or _has_ours(first.data)):
        unreadable = first.problem.startswith("cannot be read")
        raise AgentLinkError("invalid_arguments", f"{path} {first.problem}; nothing was changed.", {"path": str(path)},
                             hint="Make it readable and run this again." if unreadable else
                             f"Either {remove_by_hand} yourself, or fix the file and run this again.")

    def edit() -> None:
        found = read_file(path)
        records = read_record(folder)
        entry = records.pop(_key(path), {})
        if found.data is not None and _has_ours(found.data):
            if found.problem is not None:
                raise AgentLinkError("invalid_arguments", f"{path} {found.problem}; nothing was changed.", {"path": str(path)},
                                     hint=f"Either {remove_by_hand} yourself, or fix the file and run this again.")
            back = restored(found, entry)
            if back == "":
                try:
                    path.unlink()
                except OSError as exc:
                    raise _write_error(path, exc, remove_by_hand) from None
            else:
                write_text(path, back if back is not None else edited(found, without_agent_link(found.data), server=None, plugin=None),
                           remove_by_hand)
        if (folder / RECORD).exists():
            try:
                write_record(folder, records)
            except AgentLinkError:  # a stale entry is harmless: a config is a user only while it lists the plugin
                pass

    others = users(folder, path)
    if others:
        keep = Step(f"keep {folder}: {', '.join(others)} still list{'s' if len(others) == 1 else ''} its plugin "
                    "(uninstall from there to remove it)", action=lambda: None)
    else:
        keep = Step(f"remove {folder}", action=lambda: host_install.remove_folder(folder))
    return [Step(f"remove agent-link's MCP server and plugin from {path} (when there)", action=edit), keep]


_config = click.option("--config", "config_file", metavar="PATH", type=click.Path(dir_okay=False, path_type=Path),
                       help="opencode's config file (default: $OPENCODE_CONFIG, else the one of ~/.config/opencode "
                            "(opencode.jsonc, opencode.json, config.json) whose plugin list opencode uses)")
_dry_run = click.option("--dry-run", is_flag=True, help="print the steps, change nothing")


@click.command("opencode")
@_config
@_dry_run
def install_opencode(config_file: Path | None, dry_run: bool) -> None:
    """Install agent-link into opencode (its MCP tools, and the plugin that proves who calls them)."""
    host_install.carry_out(
        lambda: install_steps(config_file or config_path(), host_install.plugin_dir("opencode"), host_install.agent_link_executable()),
        dry_run=dry_run, done="Done. Restart opencode (its servers read the config when they start).")


@click.command("opencode")
@_config
@_dry_run
def uninstall_opencode(config_file: Path | None, dry_run: bool) -> None:
    """Remove agent-link from opencode's config (your messages stay in the state directory)."""
    host_install.carry_out(
        lambda: uninstall_steps(config_file or config_path(), host_install.plugin_dir("opencode")),
        dry_run=dry_run,
        done="Done. Restart opencode. The mailbox stays in agent-link's state directory (`agent-link health` names it).")
