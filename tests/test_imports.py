"""No import circle inside normlab: the graph of its imports, read with ``ast``, is acyclic.

Every import counts, at module level or inside a function (an import moved into a function
to dodge a circle is still a circle), except those under ``if TYPE_CHECKING:``, which never
run. An edge goes to the submodule named (``from . import vision`` -> ``normlab.data.vision``)
or else to the module imported from.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

COMPANION = Path(__file__).resolve().parents[1] / "companion"


def modules(root: Path, package: str = "normlab") -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) for every module of ``package`` under ``root``."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, (ast.Name, ast.Attribute)) and ast.unparse(test).endswith(
        "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not _is_type_checking(node):
            found += _imports(node)
    return found


def import_graph(root: Path, package: str = "normlab") -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports."""
    known = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in known.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
                continue
            base = node.module or ""
            if node.level:
                base = ".".join(
                    here[: len(here) - node.level + 1]
                    + ([node.module] if node.module else [])
                )
            targets |= {
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                for a in node.names
            }
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_normlab_has_no_import_circle() -> None:
    graph = import_graph(COMPANION)
    assert {
        "normlab.data.registry",
        "normlab.data.vision",
        "normlab.experiments.part1",
    } <= set(graph)
    assert "normlab.data.vision" in graph["normlab.data.registry"]
    assert cycles(graph) == []


def test_offline_standins_import_no_real_data_module() -> None:
    graph = import_graph(COMPANION)
    real = {
        f"normlab.data.{m}"
        for m in ("registry", "sources", "vision", "text", "tabular", "_download")
    }
    assert reachable(graph, "normlab.data.standins") & real == set()


def test_the_detector_finds_a_planted_circle(tmp_path: Path) -> None:
    """The guard itself: a lazy import that closes a circle, and one hidden from type checking only."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .loader import load\n")
    (package / "sub" / "loader.py").write_text(
        "from .table import TABLE\n\ndef load():\n    return TABLE\n"
    )
    (package / "sub" / "table.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .loader import load\n\n"
        "TABLE = {}\n\ndef names():\n    from .. import other\n    return other\n"
    )
    (package / "other.py").write_text("from .sub import loader\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.table"] == {"pkg.other"}
    assert cycles(graph) == [["pkg.other", "pkg.sub.loader", "pkg.sub.table"]]
    (package / "sub" / "table.py").write_text("TABLE = {}\n")
    assert cycles(import_graph(tmp_path, "pkg")) == []


# ------------------------------------------------------------ third-party imports are declared

ROOT = COMPANION.parent


def _top_level_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def _notebook_cells(path: Path) -> list[str]:
    """A notebook's code cells, each IPython magic or shell line replaced by ``pass``."""
    cells = json.loads(path.read_text())["cells"]
    return [
        re.sub(r"(?m)^(\s*)[%!].*$", r"\1pass", "".join(cell["source"]))
        for cell in cells
        if cell["cell_type"] == "code"
    ]


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> files importing it, over the package, tests, benchmarks, the
    book's tooling (``book/_ext``) and chapters."""
    sources = [
        (p, p.read_text())
        for folder in ("companion", "tests", "benchmarks", "book/_ext")
        for p in (ROOT / folder).rglob("*.py")
    ]
    sources += [
        (p, cell)
        for p in (ROOT / "book").glob("*.ipynb")
        for cell in _notebook_cells(p)
    ]
    local = (
        {p.stem for p in (ROOT / "tests").glob("*.py")}
        | {p.parent.name for p in (ROOT / "book" / "_ext").glob("*/__init__.py")}
        | {"normlab"}
    )
    found: dict[str, set[str]] = {}
    for path, source in sources:
        for name in _top_level_imports(source) - set(sys.stdlib_module_names) - local:
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"]) + [
        r for extra in project["optional-dependencies"].values() for r in extra
    ]
    return {
        re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.\-]+", r).group(0)).lower()
        for r in requirements
    }


def test_every_third_party_import_is_declared() -> None:
    """Each imported module belongs to a distribution listed in pyproject.toml (installed
    modules are mapped to their distributions, e.g. PIL -> pillow, sklearn -> scikit-learn)."""
    imports = third_party_imports()
    assert {"torch", "PIL", "pygments", "sklearn"} <= set(imports)
    owners = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    missing = {
        name: sorted(files)[:3]
        for name, files in imports.items()
        if not {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(name, [name])}
        & declared
    }
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


# ------------------------------------- the chapters import only what the Colab cell installs

#: The extra that each chapter's first cell installs on Colab (tests/test_colab.py).
CHAPTER_EXTRA = "notebooks"


def _canonical(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirements(distribution: str, extras: set[str]) -> list[Requirement]:
    """What ``distribution`` with ``extras`` requires on this machine: normlab's from this
    checkout's pyproject.toml (the installed metadata may be older), the others' from their
    installed metadata (none when not installed)."""
    if _canonical(distribution) == "normlab":
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        optional = project["optional-dependencies"]
        texts = project["dependencies"] + [
            r for e in sorted(extras) for r in optional[e]
        ]
        chosen = [Requirement(text) for text in texts]
        return [r for r in chosen if r.marker is None or r.marker.evaluate()]
    try:
        texts = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    chosen = [Requirement(text) for text in texts]
    return [
        r
        for r in chosen
        if r.marker is None
        or any(r.marker.evaluate({"extra": e}) for e in {""} | extras)
    ]


def dependency_closure(distribution: str, extras: set[str]) -> set[str]:
    """The canonical names of ``distribution`` and of everything it requires, recursively."""
    expanded: dict[str, set[str]] = {}
    todo = [(distribution, extras)]
    while todo:
        name, wanted = todo.pop()
        key = _canonical(name)
        if key in expanded and wanted <= expanded[key]:
            continue
        expanded[key] = expanded.get(key, set()) | wanted
        todo += [(r.name, set(r.extras)) for r in _requirements(name, wanted)]
    return set(expanded)


def chapter_imports() -> dict[str, set[str]]:
    """Top-level module -> the chapters (book/*.ipynb) importing it."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in _notebook_cells(path):
            for name in _top_level_imports(cell):
                found.setdefault(name, set()).add(path.name)
    return found


def test_chapters_import_only_what_the_colab_cell_installs() -> None:
    """A reader who installs ``normlab[notebooks]`` (Colab, a plain Jupyter) can run every
    chapter: each module a chapter imports is the standard library's, normlab's, or provided
    by a distribution that the extra pulls in."""
    closure = dependency_closure("normlab", {CHAPTER_EXTRA})
    assert {"torch", "sympy", "ipywidgets", "altair"} <= closure
    assert "myst-nb" not in closure and "jupyter-book" not in closure
    providers = importlib.metadata.packages_distributions()
    imports = chapter_imports()
    assert {"normlab", "torch", "IPython"} <= set(imports)
    outside = {
        name: sorted(chapters)
        for name, chapters in imports.items()
        if name not in sys.stdlib_module_names
        and name != "normlab"
        and not {_canonical(d) for d in providers.get(name, [])} & closure
    }
    assert outside == {}, f'not installed by "normlab[{CHAPTER_EXTRA}]": {outside}'
