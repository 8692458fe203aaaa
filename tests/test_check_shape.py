"""scripts/check_shape.py: the figures it measures and the ratchet against its allowance file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_shape.py"


@pytest.fixture(scope="module")
def shape():
    spec = importlib.util.spec_from_file_location("check_shape", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_shape"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("check_shape", None)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def long_function(name: str, body_lines: int) -> str:
    return f"def {name}():\n" + "    x = 1\n" * (body_lines - 1)


@pytest.fixture
def tree(tmp_path):
    write(tmp_path, "agent_link_core/__init__.py", "")
    write(tmp_path, "agent_link_core/small.py", "def f():\n    return 1\n")
    write(tmp_path, "plugins/demo/agent_link_demo/__init__.py", "")
    return tmp_path


def run(shape, root: Path, *extra: str) -> int:
    return shape.main(["--root", str(root), "--allowance", str(root / "allowance.json"), *extra])


def test_a_clean_tree_passes_without_an_allowance(shape, tree, capsys):
    assert run(shape, tree) == 0
    out = capsys.readouterr().out
    assert "agent_link_core: 2 / target 7000: ok" in out
    assert "import cycles: 0 (target 0)" in out and "improved" not in out


def test_a_long_function_fails_until_allowed_and_fails_again_when_it_grows(shape, tree, capsys):
    write(tree, "agent_link_core/big.py", "class App:\n" + "".join("    " + line + "\n" for line in long_function("run", 151).splitlines()))
    assert run(shape, tree) == 1
    assert "agent_link_core/big.py:App.run: 151 lines, target 150, no allowance" in capsys.readouterr().err
    assert run(shape, tree, "--update") == 0
    assert json.loads((tree / "allowance.json").read_text())["functions"] == {"agent_link_core/big.py:App.run": 151}
    assert run(shape, tree) == 0
    assert "over target, within allowance" in capsys.readouterr().out
    write(tree, "agent_link_core/big.py", "class App:\n" + "".join("    " + line + "\n" for line in long_function("run", 152).splitlines()))
    assert run(shape, tree) == 1
    assert "App.run: 152 lines, target 150, allowance 151" in capsys.readouterr().err


def test_a_shrunk_excess_is_reported_as_improved(shape, tree, capsys):
    write(tree, "agent_link_core/big.py", long_function("run", 160))
    run(shape, tree, "--update")
    write(tree, "agent_link_core/big.py", long_function("run", 155))
    assert run(shape, tree) == 0
    assert "agent_link_core/big.py:run: allowance 160, now 155" in capsys.readouterr().out


def test_nested_functions_are_measured_on_their_own(shape, tree):
    inner = "".join("    " + line + "\n" for line in long_function("inner", 151).splitlines())
    write(tree, "agent_link_core/nest.py", "def outer():\n" + inner)
    figures = shape.measure(tree).functions
    assert figures["agent_link_core/nest.py:outer.inner"] == 151
    assert figures["agent_link_core/nest.py:outer"] == 152


def test_a_long_file_fails(shape, tree, capsys):
    write(tree, "plugins/demo/agent_link_demo/huge.py", "x = 1\n" * 801)
    assert run(shape, tree) == 1
    assert "plugins/demo/agent_link_demo/huge.py: 801 lines, target 800, no allowance" in capsys.readouterr().err


def test_the_core_line_count_is_held_to_its_allowance(shape, tree, capsys):
    write(tree, "agent_link_core/a.py", "x = 1\n" * 700)
    write(tree, "allowance.json", json.dumps({"core_lines": 650, "files": {}, "functions": {}, "cycles": []}))
    assert run(shape, tree) == 0  # over the allowance but under the target: fine
    write(tree, "agent_link_core/b.py", "x = 1\n" * 7000)
    assert run(shape, tree) == 1
    assert "agent_link_core: 7702 lines, target 7000, allowance 650" in capsys.readouterr().err


def test_a_cycle_through_a_function_local_import_fails(shape, tree, capsys):
    write(tree, "agent_link_core/a.py", "from agent_link_core import b\n")
    write(tree, "agent_link_core/b.py", "def later():\n    from agent_link_core.a import thing\n    return thing\n")
    assert run(shape, tree) == 1
    assert "import cycle agent_link_core.a <-> agent_link_core.b: not in the allowance" in capsys.readouterr().err


def test_a_relative_import_cycle_in_a_plugin_is_found(shape, tree):
    write(tree, "plugins/demo/agent_link_demo/sub/__init__.py", "from .. import api\n")
    write(tree, "plugins/demo/agent_link_demo/api.py", "def f():\n    from .sub import thing\n")
    assert shape.measure(tree).cycles == [["agent_link_demo.api", "agent_link_demo.sub"]]


def test_type_checking_imports_are_not_cycles(shape, tree):
    write(tree, "agent_link_core/a.py", "from agent_link_core import b\n")
    write(tree, "agent_link_core/b.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent_link_core.a import A\n")
    assert shape.measure(tree).cycles == []


def test_a_cycle_larger_than_the_allowed_one_fails(shape, tree, capsys):
    write(tree, "agent_link_core/a.py", "import agent_link_core.b\n")
    write(tree, "agent_link_core/b.py", "import agent_link_core.a\n")
    run(shape, tree, "--update")
    assert run(shape, tree) == 0
    write(tree, "agent_link_core/b.py", "import agent_link_core.c\n")
    write(tree, "agent_link_core/c.py", "import agent_link_core.a\n")
    assert run(shape, tree) == 1
    assert "agent_link_core.a <-> agent_link_core.b <-> agent_link_core.c: not in the allowance" in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(shape, tree, capsys):
    write(tree, "allowance.json", "{not json")
    assert run(shape, tree) == 2
    assert "not a shape allowance file" in capsys.readouterr().err
    (tree / "allowance.json").unlink()
    write(tree, "agent_link_core/broken.py", "def (:\n")
    assert run(shape, tree) == 2
    assert "agent_link_core/broken.py: cannot parse" in capsys.readouterr().err
