"""What the core reads of a harness without its code (declarations, the App's table that builds them on first use), apart
from :mod:`agent_link_core.harness` so that a process that talks to no host, such as ``agent-link inbox``, never imports that."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping

from agent_link_core.addresses import is_harness_name
from agent_link_core.lazy import Struct, import_target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from agent_link_core.harness import Harness


class OutputBudget(Struct, frozen=True):
    """How much text the host shows the model in full, measured on the real host.

    :param tool_result_bytes: UTF-8 bytes of one tool result object, serialised as the host shows it (see ``json_indent``),
        beyond which the host cuts it, hides it behind a preview or refuses it.
    :param json_indent: the host shows the result's ``structuredContent`` as JSON with this indent; None for compact JSON.
    :param push_bytes: UTF-8 bytes of one pushed text (a pushed prompt, a channel event); a larger envelope is announced
        instead and read from the inbox in pages.
    """

    tool_result_bytes: int
    json_indent: int | None = None
    push_bytes: int | None = None


class SenderOption(Struct, frozen=True):
    """A command-line option of ``agent-link send|reply|status|wait`` naming a sender in a form only this harness
    recognises: the given ones reach every harness's :meth:`Harness.identify_caller` as ``meta`` ``{key: value, ...}``.

    :param flag: the option, ``--from-<something>``.
    :param key: the ``meta`` key the value is passed under.
    :param help: one line for ``--help``.
    :param requires: another declared flag this one needs, or None.
    """

    flag: str
    key: str
    help: str
    requires: str | None = None

    @property
    def param(self) -> str:
        """The click parameter name (``--from-x`` -> ``from_x``)."""
        return self.flag.lstrip("-").replace("-", "_")


class HarnessDeclaration(Struct, frozen=True):
    """A harness registered by what the core reads without its code, built from ``target`` the first time a command needs
    it: it keeps the host's modules out of processes that never talk to that host. Every field but ``target`` and
    ``caller_variables`` must equal the built harness's attribute of the same name.

    :param target: ``"package.module:attribute"`` of the :class:`Harness` subclass (or of a function without arguments
        returning the harness).
    :param caller_variables: environment variables without which (and without a request's ``_meta``)
        :meth:`Harness.identify_caller` answers None: the harness is then not built to be asked who is calling.
    """

    name: str
    target: str
    session_kind: str = ""
    host_variables: tuple[str, ...] = ()
    host_priority: int = 100
    sender_options: tuple[SenderOption, ...] = ()
    caller_variables: tuple[str, ...] = ()
    caller_arguments: tuple[str, ...] = ()

    def may_identify(self, meta: Mapping[str, Any], env: Mapping[str, str]) -> bool:
        """Whether the harness could name the caller from ``meta`` and ``env`` (so must be built)."""
        return bool(meta) or any((env.get(v) or "").strip() for v in self.caller_variables)

    def build(self) -> Harness:
        """The harness, its module imported now. :raises Exception: as importing or building it
        does; ``TypeError`` when the target is not a :class:`Harness` named :attr:`name`."""
        made = import_target(self.target)()
        harness = sys.modules.get("agent_link_core.harness")  # imported with any Harness subclass
        if harness is None or not isinstance(made, harness.Harness) or made.name != self.name:
            raise TypeError(f"{self.target} built a {type(made).__name__} named {getattr(made, 'name', None)!r}, "
                            f"not the Harness {self.name!r} it declares")
        return made


class HarnessTable(Mapping[str, "Harness"]):
    """The harnesses of an App by name (``entries``: ``{name: Harness | HarnessDeclaration}``): membership, ``len`` and the
    names build nothing; ``[name]``, ``get``, ``values()`` and ``items()`` build what they return with ``build``:
    ``(declaration) -> Harness | None`` (None: it failed, and the builder reported it and may have dropped the name)."""

    def __init__(self, entries: Mapping[str, Harness | HarnessDeclaration], build: Callable[[HarnessDeclaration], Harness | None]) -> None:
        self._entries: dict[str, Harness | HarnessDeclaration] = dict(entries)
        self._declarations = {n: e for n, e in self._entries.items() if isinstance(e, HarnessDeclaration)}
        self._build = build

    def __getitem__(self, name: str) -> Harness:
        entry = self._entries[name]
        if isinstance(entry, HarnessDeclaration):
            built = self._build(entry)
            if built is None or self._entries.get(name) is not entry:  # failed, or left out meanwhile
                self._entries.pop(name, None)
                raise KeyError(name)
            self._entries[name] = entry = built
        return entry

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def pop(self, name: str, *default: Any) -> Any:
        """Remove ``name`` without building it; its entry (built or declared), or ``default``."""
        self._declarations.pop(name, None)
        return self._entries.pop(name, *default)

    def declaration(self, name: str) -> HarnessDeclaration | None:
        """The declaration ``name`` was registered with, kept once built; None for an instance."""
        return self._declarations.get(name)

    def items(self) -> list[tuple[str, Harness]]:  # type: ignore[override]
        """``[(name, harness)]``, each built now; one that cannot be built is left out."""
        return [(name, h) for name in list(self._entries) if (h := self.get(name)) is not None]

    def values(self) -> list[Harness]:  # type: ignore[override]
        """Every harness, as :meth:`items`."""
        return [h for _, h in self.items()]

    def declared(self) -> dict[str, Harness | HarnessDeclaration]:
        """``{name: harness or declaration}``, nothing built."""
        return dict(self._entries)

    def built(self) -> list[Harness]:
        """The harnesses built so far (registered instances included)."""
        return [h for h in self._entries.values() if not isinstance(h, HarnessDeclaration)]


def check_harness(record: Any) -> None:
    """Refuse a harness that is not a :class:`~agent_link_core.harness.Harness` or a :class:`HarnessDeclaration`
    (``module:attribute`` target) with a valid name. :raises Refused: what and how to fix."""
    from agent_link_core.boundary import Refused

    harness = sys.modules.get("agent_link_core.harness")  # an instance of its Harness means it is imported
    if not isinstance(record, HarnessDeclaration) and (harness is None or not isinstance(record, harness.Harness)):
        raise Refused(f"registered a {type(record).__name__}, not a Harness", "Subclass agent_link_core.harness.Harness.")
    name = getattr(record, "name", None)
    if not is_harness_name(name):
        raise Refused(f"registered a harness named {name!r}",
                      "A harness name is its address scheme: 1-32 of a-z 0-9 -, starting with a letter.")
    if isinstance(record, HarnessDeclaration):
        module, sep, attribute = record.target.partition(":") if isinstance(record.target, str) else ("", "", "")
        if not (module and sep and attribute):
            raise Refused(f"declared harness {name!r} with target {record.target!r}",
                          "Give the harness class as 'package.module:ClassName'.")
        return
    named: Any = getattr(record, "caller_arguments", ())
    if not isinstance(named, tuple) or not all(isinstance(a, str) and len(a) > 1 and a.startswith("_") for a in named):
        raise Refused(f"harness {name!r} declares caller_arguments that are not a tuple of names starting with '_'",
                      "Set caller_arguments = ('_hostCaller', ...): names no tool uses as an argument.")
