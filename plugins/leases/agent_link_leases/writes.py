"""Which files a Codex ``apply_patch`` or a shell command is about to write (standard library
only: the hook fast path uses it).

* :func:`patch_targets`: the files an ``apply_patch`` patch adds, updates, deletes or moves
  (both names of a move), read from its ``*** Add File:``, ``*** Update File:``, ``*** Delete
  File:`` and ``*** Move to:`` lines (the patch format Codex documents in its
  ``apply_patch`` tool description).
* :func:`shell_targets`: the paths a shell command writes, as far as its text shows them:
  output redirections (``>``, ``>>``, ``>|``, ``&>``), and the operands of common file
  commands (``tee``, ``touch``, ``rm``, ``rmdir``, ``mkdir``, ``truncate``, ``shred``,
  ``unlink``, ``mv``, ``cp``, ``install``, ``ln``, ``dd of=``, ``sed -i``, ``perl -i``,
  ``git mv``/``git rm``, ``git checkout``/``git restore`` of paths), following ``cd``
  between commands; here-document bodies are data, not commands. A glob operand is expanded
  against the files that exist, as the shell does (a glob matching nothing writes nothing
  known); ``$NAME``/``${NAME}`` are expanded from the command's own earlier assignments
  (``NAME=value``, ``export NAME=value``) and the hook's environment.

What the command text cannot show is not reported, so the guard lets it pass (it refuses
only on a lease it has found): what a program writes on its own (``python script.py``,
``make``, ``npm install``, ``xargs rm``), a target holding a command substitution
(``$(...)``, backticks) or a variable set nowhere it can see (one set by an earlier command
of the session, ``read``, a loop), and files a glob would match only once they exist.
"""

from __future__ import annotations

import os
import re
import shlex

#: apply_patch header lines naming a file the patch writes
PATCH_MARKS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
#: commands whose every non-option operand is written (created, changed or removed)
ALL_OPERANDS = frozenset({"tee", "touch", "rm", "rmdir", "mkdir", "truncate", "shred", "unlink", "mv"})
#: commands whose last operand (the destination) is written
LAST_OPERAND = frozenset({"cp", "install", "ln", "rsync"})
#: words that run the command after them (their own options skipped)
WRAPPERS = frozenset({"sudo", "env", "command", "nohup", "time", "nice", "exec", "builtin"})
SEPARATOR_CHARS = frozenset(";&|()\n")
#: what leaves a word unknowable once variables are expanded: a substitution or expansion left
UNKNOWABLE = ("$", "`")
GLOB_CHARS = ("*", "?", "[")
#: ``$NAME`` or ``${NAME}``
VARIABLE_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
#: a here-document's start: ``<<WORD``, ``<<-WORD``, ``<<'WORD'``, ``<< "WORD"`` (not ``<<<``)
HEREDOC_RE = re.compile(r"(?<!<)<<(-?)\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def patch_targets(patch: str, cwd: str) -> list[str]:
    """Absolute paths (``os.path.join(cwd, name)``, normalised) an ``apply_patch`` patch writes."""
    out: list[str] = []
    for line in patch.splitlines():
        for mark in PATCH_MARKS:
            if line.startswith(mark):
                name = line[len(mark):].strip()
                if name and "\0" not in name:
                    out.append(os.path.normpath(os.path.join(cwd, name)))
    return out


def _without_heredocs(command: str) -> str:
    """``command`` with the bodies of its here-documents removed (``<<WORD`` ... ``WORD``):
    their lines are data, not commands (and may hold an odd quote)."""
    out: list[str] = []
    ends: list[str] = []
    for line in command.split("\n"):
        if ends:
            if (line.lstrip("\t") if ends[0].startswith("-") else line) == ends[0].lstrip("-"):
                ends.pop(0)
            continue
        out.append(line)
        ends = [dash + word for dash, word in HEREDOC_RE.findall(line)]
    return "\n".join(out)


def _words(command: str) -> list[str] | None:
    """Shell words and operator tokens (newlines kept as separators); None when unparsable."""
    lexer = shlex.shlex(_without_heredocs(command), posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.wordchars += "${}[]!@%+:,^"  # keep ``$NAME``, ``${NAME}`` and ``[a-z]`` classes in their word
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: not a command the shell would run either
        return None


def _operands(args: list[str]) -> list[str]:
    out: list[str] = []
    ended = False
    for arg in args:
        if not ended and arg == "--":
            ended = True
        elif ended or not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _written(name: str, args: list[str]) -> list[str]:
    """The operands of one simple command (``name`` and ``args``, wrappers removed) it writes."""
    if name in ALL_OPERANDS:
        return _operands(args)
    if name in LAST_OPERAND:
        given = _operands(args)
        return given[-1:] if len(given) > 1 else []
    if name == "dd":
        return [a[3:] for a in args if a.startswith("of=")]
    if name == "git" and args[:1] in (["mv"], ["rm"], ["restore"]):
        return _operands(args[1:])
    if name == "git" and args[:1] == ["checkout"] and "--" in args:  # `git checkout [rev] -- paths`
        return args[args.index("--") + 1:]
    if name in ("sed", "perl"):
        in_place = any(a.startswith("-i") or a.startswith("--in-place") or (name == "perl" and a.startswith("-") and "i" in a[1:])
                       for a in args)
        if not in_place:
            return []
        operands: list[str] = []
        script_given = False
        skip = False
        for arg in args:
            if skip:
                skip = False
            elif arg in ("-e", "--expression", "-f", "--file") or (name == "perl" and arg.startswith("-") and arg.endswith("e")):
                script_given = skip = True
            elif not arg.startswith("-"):
                operands.append(arg)
        return operands if script_given else operands[1:]
    return []


def shell_targets(command: str, cwd: str) -> list[str]:
    """Absolute, normalised paths ``command`` (one shell command line, run in ``cwd``) writes;
    see the module docstring for what is recognised. ``/dev/*`` targets are left out."""
    words = _words(command)
    if words is None:
        return []
    out: list[str] = []
    here = cwd
    simple: list[str] = []
    assigned: dict[str, str] = {}

    def finish() -> None:
        nonlocal here
        args = list(simple)
        simple.clear()
        prefix: list[re.Match[str]] = []
        while args and (match := ASSIGNMENT_RE.fullmatch(args[0])):  # VAR=value prefixes
            prefix.append(match)
            args.pop(0)
        if args[:1] == ["export"]:  # export NAME=value sets NAME as a plain assignment does
            prefix += [m for m in map(ASSIGNMENT_RE.fullmatch, args[1:]) if m]
            args = []
        if not args:  # assignments alone set shell variables for the commands after them
            for match in prefix:
                assigned[match.group(1)] = _expand(match.group(2), assigned)
            return
        while args and args[0] in WRAPPERS:
            args.pop(0)
            while args and (args[0].startswith("-") or "=" in args[0]):
                args.pop(0)
        if not args:
            return
        name, rest = os.path.basename(args[0]), args[1:]
        if name == "cd":
            target = _operands(rest)
            where = _expand(target[0], assigned) if len(target) == 1 else "$"
            if not any(c in where for c in (*UNKNOWABLE, *GLOB_CHARS)):
                here = os.path.normpath(os.path.join(here, os.path.expanduser(where)))
            return
        for word in _written(name, rest):
            out.extend(_paths(here, word, assigned))

    i = 0
    while i < len(words):
        word = words[i]
        if word in REDIRECTS or (word.startswith(">") and set(word) <= {">", "|"}):
            if i + 1 < len(words) and not words[i + 1].startswith("&"):
                out.extend(_paths(here, words[i + 1], assigned))
            i += 2
            continue
        if word.startswith((">&", "<")) or word == "&>&":
            i += 2 if word in ("<", "<<", "<<<") else 1  # an input or a descriptor: nothing written
            continue
        if set(word) <= SEPARATOR_CHARS or word in ("{", "}", "!"):  # a group's braces and a negation run what follows
            finish()
        else:
            simple.append(word)
        i += 1
    finish()
    return [p for p in out if p and not p.startswith("/dev/")]


def _expand(word: str, assigned: dict[str, str]) -> str:
    """``word`` with each ``$NAME``/``${NAME}`` replaced by its value (assigned earlier in
    the command, else the environment's); one set nowhere is left as it is (unknowable)."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        found = assigned.get(name, os.environ.get(name))
        return match.group(0) if found is None else found

    return VARIABLE_RE.sub(value, word) if "$" in word else word


def _paths(cwd: str, word: str, assigned: dict[str, str]) -> list[str]:
    """The absolute, normalised paths one target word names in ``cwd``: its variables
    expanded, ``~`` too, a glob expanded against existing files ([] when it matches none);
    [] for a word still holding a substitution or an unknown variable."""
    word = _expand(word, assigned)
    if not word or "\0" in word or any(c in word for c in UNKNOWABLE):
        return []
    word = os.path.expanduser(word)
    if any(c in word for c in GLOB_CHARS):
        import glob  # only for a glob operand: the hook's fast path stays light

        # root_dir: the working directory's own name is no pattern (it may hold "[")
        return [os.path.normpath(os.path.join(cwd, p)) for p in sorted(glob.glob(word, root_dir=cwd))]
    return [os.path.normpath(os.path.join(cwd, word))]
