"""Every module a chapter imports declares its public names in ``__all__``.

The chapters (book/*.ipynb) are the package's first readers, so what their code cells import
from normlab is its public API. Each module they import (``import normlab.x``,
``from normlab.x import y``, and ``from normlab import x`` where ``x`` is a submodule) defines
``__all__``, listing exactly its public names: every name without a leading underscore that
the module defines, and the names it deliberately re-exports from elsewhere in normlab; never
an imported helper (``pd``, ``torch``, ``Any``). Every name a chapter imports from such a
module is in its ``__all__`` or is a submodule. The API reference page is generated from these
lists (tests/test_api_reference.py).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import sys
import types
from collections.abc import Iterator, Set
from pathlib import Path

import pytest
from test_imports import _notebook_cells

BOOK = Path(__file__).resolve().parents[1] / "book"


# ---------------------------------------------------------------- what the chapters import


def normlab_imports(source: str, package: str = "normlab") -> dict[str, set[str]]:
    """Module -> the names imported from it (none for ``import package.x``), in ``source``."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    found.setdefault(alias.name, set())
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == package:
                names = {alias.name for alias in node.names} - {"*"}
                found.setdefault(node.module, set()).update(names)
    return found


def is_submodule(module: str, name: str) -> bool:
    """Whether ``module.name`` is a module (``from normlab import claims``)."""
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except ModuleNotFoundError:  # ``module`` is no package
        return False


def with_submodules(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """``imports`` plus, for each name imported from a package that is itself a module, that
    module (nothing imported from it by name)."""
    found = {module: set(names) for module, names in imports.items()}
    for module, names in imports.items():
        for name in names:
            if is_submodule(module, name):
                found.setdefault(f"{module}.{name}", set())
    return found


def chapter_imports(book: Path = BOOK) -> dict[str, set[str]]:
    """Every normlab module the chapters' code cells import -> the names imported from it."""
    found: dict[str, set[str]] = {}
    for path in sorted(book.glob("*.ipynb")):
        for cell in _notebook_cells(path):
            for module, names in normlab_imports(cell).items():
                found.setdefault(module, set()).update(names)
    return with_submodules(found)


CHAPTER_IMPORTS = chapter_imports()


# ------------------------------------------------------------- what a module defines itself


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module body, those inside ``if`` and ``try`` blocks included."""
    found = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            blocks = [node.body, node.orelse, node.finalbody]
            blocks += [handler.body for handler in node.handlers]
            found += [n for block in blocks for n in _top_level(block)]
    return found


def _targets(node: ast.expr) -> list[str]:
    """The names an assignment target binds (``a``, ``a, b``)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [name for element in node.elts for name in _targets(element)]
    return []


def defined_names(tree: ast.Module) -> set[str]:
    """The names a module's own code binds: its functions, classes and assignments."""
    found: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found.update(name for target in node.targets for name in _targets(target))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            found.update(_targets(node.target))
    return found


def imported_names(tree: ast.Module, package: str) -> dict[str, bool]:
    """The names a module's imports bind -> whether they come from ``package``."""
    found: dict[str, bool] = {}
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                found[bound] = alias.name.split(".")[0] == package
        elif isinstance(node, ast.ImportFrom):
            inside = bool(node.level) or (node.module or "").split(".")[0] == package
            for alias in node.names:
                found[alias.asname or alias.name] = inside
    return found


# ----------------------------------------------------------------------------- the check


def problems(
    module: types.ModuleType, imported: Set[str] = frozenset(), package: str = "normlab"
) -> list[str]:
    """What is wrong with ``module``'s ``__all__``, given the names the chapters import from
    it: one line each, none when it lists exactly its public API."""
    if not hasattr(module, "__all__"):
        return ["defines no __all__"]
    listed = list(module.__all__)
    tree = ast.parse(Path(module.__file__).read_text(), filename=module.__file__)
    defined, imports = defined_names(tree), imported_names(tree, package)
    twice = sorted({name for name in listed if listed.count(name) > 1})
    found = [f"lists {name} twice" for name in twice]
    for name in dict.fromkeys(listed):
        submodule = f"{module.__name__}.{name}"
        if name.startswith("_"):
            found.append(f"lists the private name {name}")
        elif not hasattr(module, name):
            found.append(f"lists {name}, which it does not have")
        elif isinstance(getattr(module, name), types.ModuleType):
            if getattr(module, name).__name__ != submodule:
                found.append(f"lists {name}, an imported module, not a submodule")
        elif name not in defined and not imports.get(name, False):
            found.append(f"lists {name}, imported from outside {package}")
    for name in sorted(defined - set(listed)):
        value = getattr(module, name, None)
        if not name.startswith("_") and not isinstance(value, types.ModuleType):
            found.append(f"defines {name} without listing it")
    for name in sorted(imported - set(listed)):
        if not is_submodule(module.__name__, name):
            found.append(f"a chapter imports {name}, which it does not list")
    return found


def test_the_chapters_import_these_modules() -> None:
    """The parser finds the chapters' imports of every kind (so the check below runs)."""
    assert {
        "normlab",  # import normlab
        "normlab.claims",  # from normlab import claims
        "normlab.experiments.gate_study",  # from normlab.experiments import gate_study
        "normlab.widgets",  # from normlab.widgets import ...
        "normlab.display",
        "normlab.chapters.ch06",  # from normlab.chapters import ch06
        "normlab.data.corruptions",
        "normlab.experiments.part1",
        "normlab.experiments.part1_conv",
    } <= set(CHAPTER_IMPORTS)
    assert "static_twin" in CHAPTER_IMPORTS["normlab.widgets"]


@pytest.mark.parametrize("name", sorted(CHAPTER_IMPORTS))
def test_a_module_the_chapters_import_lists_its_public_names(name: str) -> None:
    module = importlib.import_module(name)
    assert problems(module, CHAPTER_IMPORTS[name]) == []


# ------------------------------------------------------------------ the guards themselves


def test_the_parser_reads_every_kind_of_import() -> None:
    source = (
        "import normlab\nimport normlab.stats as st\nimport numpy\n"
        "from normlab import claims, show_source\n"
        "from normlab.widgets import (GateRuns as Runs,\n    static_twin)\n"
        "from numpy import array\n"
        "def f():\n    from normlab.display import glue\n"
    )
    assert normlab_imports(source) == {
        "normlab": {"claims", "show_source"},
        "normlab.stats": set(),
        "normlab.widgets": {"GateRuns", "static_twin"},
        "normlab.display": {"glue"},
    }
    found = with_submodules(normlab_imports(source))
    assert found["normlab.claims"] == set() and "normlab.show_source" not in found


def test_the_notebooks_are_read_from_their_code_cells(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["from normlab.figures import style\n"]},
        {
            "cell_type": "code",
            "source": ["%matplotlib inline\n", "import normlab.stats"],
        },
    ]
    (tmp_path / "01_x.ipynb").write_text(json.dumps({"cells": cells}))
    assert chapter_imports(tmp_path) == {"normlab.stats": set()}


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package ``plantedpkg`` on the path: a sound ``__init__``, a module without
    ``__all__`` (``bare``) and one whose ``__all__`` has every fault (``api``)."""
    package = tmp_path / "plantedpkg"
    package.mkdir()
    (package / "__init__.py").write_text("VERSION = 1\n__all__ = ['VERSION']\n")
    (package / "sub.py").write_text("def helper():\n    return 1\n")
    (package / "bare.py").write_text("def f():\n    return 1\n")
    (package / "api.py").write_text(
        "from typing import Any\nimport math\nfrom . import sub\nfrom .sub import helper\n\n"
        "__all__ = ['f', 'f', 'helper', 'Any', 'math', 'gone', '_g', 'sub2']\n\n"
        "def f():\n    return 1\n\ndef _g():\n    return 2\n\n"
        "def forgotten():\n    return 3\n\nLIMIT = 4\nsub2 = sub\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "plantedpkg"
    for name in [n for n in sys.modules if n.split(".")[0] == "plantedpkg"]:
        del sys.modules[name]


def test_the_check_finds_each_kind_of_fault(planted: str) -> None:
    top, bare, api = (
        importlib.import_module(name)
        for name in (planted, f"{planted}.bare", f"{planted}.api")
    )
    assert problems(top, {"VERSION", "sub"}, package=planted) == []
    assert problems(bare, package=planted) == ["defines no __all__"]
    assert problems(api, {"f", "LIMIT"}, package=planted) == [
        "lists f twice",
        "lists Any, imported from outside plantedpkg",
        "lists math, an imported module, not a submodule",
        "lists gone, which it does not have",
        "lists the private name _g",
        "lists sub2, an imported module, not a submodule",
        "defines LIMIT without listing it",
        "defines forgotten without listing it",
        "a chapter imports LIMIT, which it does not list",
    ]
