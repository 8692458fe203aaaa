"""opencode's config layers, found, read and merged as opencode 1.18.33 does it.

Docs: https://opencode.ai/docs/config/ ("Precedence order"). The exact order below is the one of
opencode 1.18.33's ``Config.loadInstanceState`` (``packages/opencode/src/config/config.ts``,
read from the code bundled in the pinned binary), lowest first; a later layer wins:

1. the global folder ``$XDG_CONFIG_HOME/opencode`` (default ``~/.config/opencode``):
   ``config.json``, ``opencode.json``, ``opencode.jsonc``;
2. the file ``$OPENCODE_CONFIG``;
3. the project's ``opencode.json`` then ``opencode.jsonc`` of each folder from the git worktree's
   root (``/`` outside git) down to the working directory (none with
   ``OPENCODE_DISABLE_PROJECT_CONFIG``);
4. per config folder, in this order: the global folder, every ``.opencode`` folder from the
   working directory *up* to the worktree's root (the nearest first), ``~/.opencode``,
   ``$OPENCODE_CONFIG_DIR``: a ``.opencode`` folder's or ``$OPENCODE_CONFIG_DIR``'s
   ``opencode.json`` then ``opencode.jsonc``, then the folder's markdown agents
   (``{agent,agents}/**/*.md``, then ``{mode,modes}/*.md`` as primary agents);
5. ``$OPENCODE_CONFIG_CONTENT``;
6. the managed folder ``/etc/opencode`` (:data:`MANAGED_DIR`): ``opencode.json``, ``opencode.jsonc``;
7. then the config's ``mode.<name>`` entries are merged into ``agent.<name>`` (as primary
   agents) and ``$OPENCODE_PERMISSION`` (JSON) over ``permission``.

Each layer is merged with remeda's ``mergeDeep``: objects key by key, recursively; any other
value replaces. So a key keeps the place of the first layer that had it and takes the value of
the last one: that is the order in which the last matching permission key decides. Each file is
JSONC (:mod:`agent_link_hostkit.jsonc`) after ``{env:VAR}`` and ``{file:path}`` are
substituted in its text. Not read: remote configs (an organisation's ``.well-known/opencode``
named in opencode's ``auth.json``, a console account's config), the legacy TOML ``config`` file,
and the legacy ``tools`` object. ``plugins/approvals/tests/test_approvals_opencode_realhost.py``
compares the merge with ``opencode debug config`` and ``opencode debug agent``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent_link_hostkit import jsonc
from agent_link_approvals.files import ConfigFileError, decode_utf8, read_bytes

Path_ = tuple[str, ...]
#: opencode's managed config folder on Linux (an administrator's settings, merged last)
MANAGED_DIR = Path("/etc/opencode")


@dataclass
class Layer:
    """One layer: ``source`` names it in reports (a file's path, or an environment variable),
    ``path`` is its file (None for a variable), ``data`` its parsed object (None: absent),
    ``raw`` the file's bytes, ``scope`` where it comes from (``global``, ``custom``, ``project``,
    ``folder``, ``agent`` (a markdown agent), ``content``, ``managed``, ``file`` (a file named
    alone))."""

    source: str
    path: Path | None
    scope: str
    data: dict[str, Any] | None = None
    raw: bytes | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"source", "scope", "exists"}``."""
        return {"source": self.source, "scope": self.scope, "exists": self.data is not None}


@dataclass
class Merged:
    """The merged config ``data`` and, for every path in it (a tuple of keys), the ``source`` of
    the layer whose value it holds."""

    data: dict[str, Any] = field(default_factory=dict)
    sources: dict[Path_, str] = field(default_factory=dict)

    def source(self, *path: str) -> str | None:
        """The layer that set the value at ``path`` (None: not in the merged config)."""
        return self.sources.get(path)


def global_dir(env: Mapping[str, str]) -> Path:
    """opencode's global config folder: ``$XDG_CONFIG_HOME/opencode``, default ``~/.config/opencode``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "opencode"


def config_path(env: Mapping[str, str]) -> Path:
    """The file ``agent-link install opencode`` writes and ``apply`` changes by default:
    ``$OPENCODE_CONFIG``, else ``opencode.json`` in :func:`global_dir`."""
    return Path(env["OPENCODE_CONFIG"]) if env.get("OPENCODE_CONFIG") else global_dir(env) / "opencode.json"


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def worktree(directory: Path) -> Path:
    """The git worktree ``directory`` is in (the nearest folder with a ``.git``), else ``/``,
    where opencode stops looking for project files."""
    for folder in (directory, *directory.parents):
        if (folder / ".git").exists():
            return folder
    return Path(directory.anchor or "/")


def _up(targets: list[str], start: Path, stop: Path) -> list[Path]:
    """opencode's ``FileSystem.up``: from ``start`` up to ``stop`` (or the root), the nearest
    first, each folder's ``targets`` that exist, in the order given."""
    found: list[Path] = []
    folder = start
    while True:
        found += [folder / t for t in targets if (folder / t).exists()]
        if folder == stop or folder.parent == folder:
            return found
        folder = folder.parent


def substitute(text: str, env: Mapping[str, str], folder: Path, source: str) -> str:
    """opencode's ``{env:VAR}`` (the variable, or nothing) and ``{file:path}`` (the file's text,
    trimmed, JSON-escaped; relative to ``folder``; left alone on a line starting with ``//``).

    :raises ConfigFileError: ``malformed``: a ``{file:...}`` that cannot be read.
    """
    text = re.sub(r"\{env:([^}]+)\}", lambda m: env.get(m.group(1)) or "", text)

    def file_text(match: re.Match[str]) -> str:
        line = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
        if line.lstrip().startswith("//"):
            return match.group(0)
        name = match.group(0)[len("{file:"):-1]
        target = Path(os.path.expanduser(name) if name.startswith("~/") else name)
        target = target if target.is_absolute() else folder / target
        try:
            content = target.read_text(encoding="utf-8-sig").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigFileError("malformed", f"{source}: bad file reference {match.group(0)!r} "
                                               f"({target}: {getattr(exc, 'strerror', None) or exc})") from None
        return json.dumps(content, ensure_ascii=False)[1:-1]

    return re.sub(r"\{file:[^}]+\}", file_text, text)


def parse_text(text: str, source: str) -> dict[str, Any]:
    """A layer's (substituted) text as opencode reads it: JSONC; blank is empty.

    :raises ConfigFileError: ``malformed``, naming ``source`` (and the line and column).
    """
    if not text.strip():
        return {}
    try:
        data = jsonc.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError("malformed", f"{source} is not valid JSON or JSONC (line {exc.lineno}, column "
                                           f"{exc.colno}: {exc.msg}); opencode would not read it") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigFileError("malformed", f"{source} is not valid JSON or JSONC ({exc}); opencode would not read it") from None
    if not isinstance(data, dict):
        raise ConfigFileError("malformed", f"{source} is not a JSON object")
    return data


def read_layer(path: Path, scope: str, env: Mapping[str, str]) -> Layer:
    """The config file at ``path`` as a layer (absent: ``data`` None).

    :raises ConfigFileError: unreadable, not UTF-8, or malformed (naming the file).
    """
    try:
        raw: bytes | None = read_bytes(path)
    except ConfigFileError as exc:
        if exc.kind != "missing":
            raise
        raw = None
    return layer_of(Layer(str(path), path, scope), raw, env)


def layer_of(layer: Layer, raw: bytes | None, env: Mapping[str, str]) -> Layer:
    """``layer`` (a file's) holding ``raw`` instead (None: absent), parsed as opencode parses it.

    :raises ConfigFileError: not UTF-8, or malformed (naming the file).
    """
    assert layer.path is not None
    if raw is None:
        return dataclasses.replace(layer, data=None, raw=None)
    text = substitute(decode_utf8(layer.path, raw, bom=True), env, layer.path.parent, layer.source)
    return dataclasses.replace(layer, data=parse_text(text, layer.source), raw=raw)


def front_matter(text: str) -> dict[str, Any] | None:
    """The YAML front matter (between ``---`` lines at the top) of a markdown agent file, or
    None when it has none or opencode could not read it (opencode then skips the file)."""
    match = re.match(r"\A---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", text, re.DOTALL)
    if not match:
        return None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def markdown_layers(folder: Path) -> list[Layer]:
    """The markdown agents opencode loads from the config folder ``folder``, one layer each
    (``{"agent": {name: front matter}}``): ``{agent,agents}/**/*.md`` (name: the path below
    that folder without ``.md``), then ``{mode,modes}/*.md`` (as primary agents); files opencode
    could not read are left out, as opencode leaves them."""
    layers: list[Layer] = []
    for sub, pattern, mode in (("agent", "**/*.md", False), ("agents", "**/*.md", False),
                               ("mode", "*.md", True), ("modes", "*.md", True)):
        for file in sorted((folder / sub).glob(pattern)):
            try:
                matter = front_matter(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
            if matter is not None:
                name = file.relative_to(folder / sub).with_suffix("").as_posix()
                layers.append(Layer(str(file), file, "agent", {"agent": {name: {**matter, **({"mode": "primary"} if mode else {})}}}))
    return layers


def real_layers(env: Mapping[str, str], directory: Path) -> list[Layer]:
    """Every layer opencode reads for a session in ``directory`` with the environment ``env``,
    in the order of the module docstring (absent files included, with ``data`` None).

    :raises ConfigFileError: a layer that exists but cannot be read or parsed (naming it).
    """
    directory = directory.resolve()
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    gdir = global_dir(env)
    layers = [read_layer(gdir / name, "global", env) for name in ("config.json", "opencode.json", "opencode.jsonc")]
    if env.get("OPENCODE_CONFIG"):
        layers.append(read_layer(Path(env["OPENCODE_CONFIG"]), "custom", env))
    stop = worktree(directory)
    project = not _truthy(env.get("OPENCODE_DISABLE_PROJECT_CONFIG"))
    if project:
        layers += [read_layer(f, "project", env) for f in reversed(_up(["opencode.jsonc", "opencode.json"], directory, stop))]
    config_dir = env.get("OPENCODE_CONFIG_DIR") or None
    folders: list[Path] = []
    for folder in [gdir, *(_up([".opencode"], directory, stop) if project else []), *_up([".opencode"], home, home),
                   *([Path(config_dir)] if config_dir else [])]:
        if str(folder) not in map(str, folders):
            folders.append(folder)
    for folder in folders:
        if str(folder).endswith(".opencode") or str(folder) == config_dir:
            layers += [read_layer(folder / name, "folder", env) for name in ("opencode.json", "opencode.jsonc")]
        layers += markdown_layers(folder)
    if env.get("OPENCODE_CONFIG_CONTENT"):
        text = substitute(env["OPENCODE_CONFIG_CONTENT"], env, directory, "OPENCODE_CONFIG_CONTENT")
        layers.append(Layer("OPENCODE_CONFIG_CONTENT", None, "content", parse_text(text, "OPENCODE_CONFIG_CONTENT")))
    if MANAGED_DIR.exists():
        layers += [read_layer(MANAGED_DIR / name, "managed", env) for name in ("opencode.json", "opencode.jsonc")]
    return layers


def _record(value: Any, path: Path_, sources: dict[Path_, str], source_of: Callable[[Path_], str | None]) -> None:
    src = source_of(path)
    if src is not None:
        sources[path] = src
    if isinstance(value, dict):
        for key, inner in value.items():
            _record(inner, (*path, key), sources, source_of)


def _merge_into(base: dict[str, Any], over: dict[str, Any], path: Path_, sources: dict[Path_, str],
                source_of: Callable[[Path_], str | None]) -> None:
    """remeda's ``mergeDeep(base, over)`` in place, recording each value's layer."""
    for key, value in over.items():
        here = (*path, key)
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            src = source_of(here)
            if src is not None:
                sources[here] = src
            _merge_into(base[key], value, here, sources, source_of)
            continue
        base[key] = copy.deepcopy(value)
        for old in [p for p in sources if p[:len(here)] == here]:
            del sources[old]
        _record(value, here, sources, source_of)


def _constant(source: str) -> Callable[[Path_], str | None]:
    return lambda _path: source


def _mode_source(sources: dict[Path_, str], name: str) -> Callable[[Path_], str | None]:
    """Where a value of ``agent.<name>`` made from the config's ``mode.<name>`` came from."""
    def source_of(path: Path_) -> str | None:
        inner = path[2:]
        return sources.get(("mode", name, *inner)) if inner and inner != ("mode",) else sources.get(("mode", name))
    return source_of


def merge(layers: list[Layer], env: Mapping[str, str]) -> Merged:
    """The config opencode ends up with from ``layers`` (in order) and ``env``'s
    ``OPENCODE_PERMISSION`` (invalid JSON there is skipped, as opencode skips it)."""
    merged = Merged()
    for layer in layers:
        if layer.data is not None:
            _merge_into(merged.data, layer.data, (), merged.sources, _constant(layer.source))
    modes = merged.data.get("mode")
    for name, value in (modes.items() if isinstance(modes, dict) else ()):
        merged.data.setdefault("agent", {})
        if isinstance(value, dict) and isinstance(merged.data["agent"], dict):
            _merge_into(merged.data["agent"], {name: {**value, "mode": "primary"}}, ("agent",), merged.sources,
                        _mode_source(dict(merged.sources), name))
    if env.get("OPENCODE_PERMISSION"):
        try:
            extra = json.loads(env["OPENCODE_PERMISSION"])
        except ValueError:
            extra = None
        if isinstance(extra, dict):
            base = merged.data.get("permission")
            if not isinstance(base, dict):
                base = merged.data["permission"] = {}
            _merge_into(base, extra, ("permission",), merged.sources, _constant("OPENCODE_PERMISSION"))
    return merged
