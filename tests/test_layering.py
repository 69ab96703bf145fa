"""The package's modules in layers by kind: a module imports only from its own layer or below.

LAYERS declares, bottom to top, which modules are of which kind; every import of every
module (read with ``ast``, lazy imports inside functions included, as in
``tests/test_imports.py``) must point at the same layer or a lower one, and no modules
may import each other in a circle. A second rule: only the presentation layer draws
(imports matplotlib or Altair, or calls a plotting API).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_imports import COMPANION, cycles, import_graph, modules

#: Bottom to top: (kind, the modules of that kind, as dotted prefixes). A module belongs to
#: the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core helpers",  # checks, files, records, the runtime, the paper's settings
        (
            "normlab._checks",
            "normlab._extras",
            "normlab._hits",
            "normlab._io",
            "normlab._lock",
            "normlab._provenance",
            "normlab._records",
            "normlab._runtime",
            "normlab.paper",
        ),
    ),
    (
        "layers and data",  # the building blocks, which know nothing of models or training
        (
            "normlab.layers",
            "normlab.functional",
            "normlab.data",
            "normlab.augment",
            "normlab.callbacks",
            "normlab.perplexity",
            # confidence intervals and paired tests: pure maths, which the experiments'
            # summaries and the analysis both use
            "normlab.stats",
        ),
    ),
    ("registry and models", ("normlab.normalisers", "normlab.models")),
    (
        "training",  # fitting a model, its checkpoints, AutoNorm-S's gate schedule
        (
            "normlab.checkpoint",
            "normlab._evaluation",
            "normlab._fit_config",
            "normlab.training",
            "normlab.population",
            "normlab.population_noise",
            "normlab._population_opt",
            "normlab._population_ensemble",
            "normlab._population_vit",
            "normlab.gates",
            "normlab.corruption_suite",
        ),
    ),
    ("theory", ("normlab.symbolic", "normlab.divergence")),
    # tables of runs and their summaries, and a gated run's telemetry as a table: read by
    # the runner, the studies, the analysis and the figures, knowing nothing of any study
    ("run tables", ("normlab.run_tables", "normlab.gate_tables")),
    (
        "experiment machinery",  # grids, the registry and the runner every study uses
        (
            "normlab.experiments.grid",
            "normlab.experiments.registry",
            "normlab.experiments.runner",
            "normlab.experiments.populations",
            "normlab.experiments.costs",
            "normlab.experiments.cluster",
        ),
    ),
    ("experiments", ("normlab.experiments",)),  # the studies, and the package itself
    (
        "analysis",  # the studies' tables, claims, saved sets and their verification
        (
            "normlab.analysis",
            "normlab.claims",
            "normlab._saved_io",
            "normlab.results",
            "normlab.verification",
            "normlab.robustness",
        ),
    ),
    (
        "presentation",  # figures, tables and widgets for the chapters
        (
            "normlab.figures",
            "normlab.display",
            "normlab.names",
            "normlab.facts",
            # one module a chapter: the numbers and tables its prose quotes
            "normlab.chapters",
            "normlab.interactive",
            "normlab.widgets",
        ),
    ),
    ("entry points", ("normlab", "normlab.__main__")),
)

#: Calls that draw (on a matplotlib axis or figure) and the constructor of a figure.
PLOTTING_CALLS = frozenset(
    {
        "Figure",
        "add_subplot",
        "axhline",
        "axvline",
        "bar",
        "barh",
        "contour",
        "errorbar",
        "fill_between",
        "hist",
        "imshow",
        "pcolormesh",
        "plot",
        "scatter",
        "subplots",
    }
)
DRAWING_PACKAGES = frozenset({"matplotlib", "altair"})


def layer_of(module: str) -> int:
    """The index in LAYERS of ``module``'s layer (its longest matching prefix)."""
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    if best is None:
        raise KeyError(module)
    return best[0]


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    }


def draws(tree: ast.AST) -> list[str]:
    """What in ``tree`` draws: imports of matplotlib or Altair (also through
    ``require("altair", ...)``) and calls of plotting APIs, as ``line: what``."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else None
            if isinstance(func, ast.Name):
                called = func.id
            if called in PLOTTING_CALLS:
                found.append(f"{node.lineno}: calls {called}")
            if called == "require" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and first.value in DRAWING_PACKAGES:
                    names = [first.value]
        found += [
            f"{node.lineno}: imports {n}"
            for n in names
            if n.split(".")[0] in DRAWING_PACKAGES
        ]
    return found


def drawing_modules(root: Path, package: str = "normlab") -> dict[str, list[str]]:
    """Module -> what it draws, for every module outside the presentation layer."""
    presentation = next(
        i for i, (kind, _) in enumerate(LAYERS) if kind == "presentation"
    )
    out = {}
    for name, (path, _) in modules(root, package).items():
        if layer_of(name) == presentation:
            continue
        found = draws(ast.parse(path.read_text(), filename=str(path)))
        if found:
            out[name] = found
    return out


# ------------------------------------------------------------------------------ tests


def test_every_module_has_a_layer() -> None:
    for name in modules(COMPANION):
        layer_of(name)  # a KeyError names a module that LAYERS does not place


def test_no_module_imports_from_a_higher_layer() -> None:
    found = sorted(upward_imports(import_graph(COMPANION)))
    assert not found, "upward imports: " + "; ".join(
        f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
        for a, b in found
    )


def test_no_import_circle() -> None:
    assert cycles(import_graph(COMPANION)) == []


def test_only_the_presentation_layer_draws() -> None:
    found = drawing_modules(COMPANION)
    assert not found, f"draw in normlab.figures instead: {found}"


def private_imports(root: Path, package: str = "normlab.experiments") -> list[str]:
    """``module: name`` for each private name (``_x``) that a module of ``package`` imports
    from another module of ``package``: what two studies share is public, or lives lower."""
    found = []
    for name, (path, is_package) in modules(root).items():
        if not (name == package or name.startswith(package + ".")):
            continue
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                source = ".".join(
                    here[: len(here) - node.level + 1] + ([source] if source else [])
                )
            if not source.startswith(package) or source.rsplit(".", 1)[-1][:1] == "_":
                continue  # another package's, or a private module's own names
            found += [
                f"{name}: {alias.name} from {source}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def test_no_study_imports_another_ones_private_names() -> None:
    assert private_imports(COMPANION) == []


#: Calls that build a table of results or compute a statistic over one: what belongs in
#: :mod:`normlab.analysis` (or :mod:`normlab.stats`, :mod:`normlab.claims`), not in a study.
TABLE_CALLS = frozenset(
    {
        "DataFrame",
        "agg",
        "concat",
        "groupby",
        "mean_ci",
        "paired_test",
        "pivot",
        "pivot_table",
        "polyfit",
        "slope_log2",
        "slopes_log2",
    }
)


def table_builders(root: Path, package: str = "normlab.experiments") -> list[str]:
    """``module:line: calls name`` for each call in ``package`` that builds a results table
    or computes a statistic over one (:data:`TABLE_CALLS`)."""
    found = []
    for name, (path, _) in modules(root).items():
        if not (name == package or name.startswith(package + ".")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else None
            if isinstance(func, ast.Name):
                called = func.id
            if called in TABLE_CALLS:
                found.append(f"{name}:{node.lineno}: calls {called}")
    return found


def test_the_studies_build_no_tables() -> None:
    """``experiments/`` declares grids and run functions; tables and statistics of their
    runs live in the analysis package."""
    found = table_builders(COMPANION)
    assert not found, "move to normlab.analysis: " + "; ".join(found)


# ------------------------------------------------------------------ the guards themselves


def test_the_guards_find_a_planted_upward_import_and_a_drawing(tmp_path: Path) -> None:
    package = tmp_path / "normlab"
    (package / "layers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers" / "__init__.py").write_text("")
    (package / "layers" / "norms.py").write_text(
        "def f():\n    from ..claims import judge\n    return judge\n"
    )
    (package / "claims.py").write_text(
        "def judge():\n    from matplotlib import pyplot\n    return pyplot\n"
    )
    (package / "stats.py").write_text(
        "def ci(ax):\n    ax.errorbar([0], [1])\n"
        "def chart():\n    return require('altair', 'x')\n"
    )
    (package / "figures.py").write_text(
        "from matplotlib.figure import Figure\nFigure()\n"
    )
    (package / "experiments").mkdir()
    (package / "experiments" / "__init__.py").write_text("")
    (package / "experiments" / "a.py").write_text("_shared = 1\n")
    (package / "experiments" / "b.py").write_text("from .a import _shared\n")
    (package / "experiments" / "c.py").write_text(
        "def table(runs):\n    return runs.groupby('seed').mean()\n"
    )
    assert private_imports(tmp_path) == [
        "normlab.experiments.b: _shared from normlab.experiments.a"
    ]
    assert table_builders(tmp_path) == ["normlab.experiments.c:2: calls groupby"]
    graph = import_graph(tmp_path)
    assert upward_imports(graph) == {("normlab.layers.norms", "normlab.claims")}
    found = drawing_modules(tmp_path)
    assert set(found) == {"normlab.claims", "normlab.stats"}  # figures may draw
    assert found["normlab.claims"] == ["2: imports matplotlib"]
    assert sorted(found["normlab.stats"]) == ["2: calls errorbar", "4: imports altair"]


@pytest.mark.parametrize(
    "module, kind",
    [
        ("normlab.figures.gates", "presentation"),
        ("normlab.layers.gate", "layers and data"),
        ("normlab.experiments.runner", "experiment machinery"),
        ("normlab.experiments.part1", "experiments"),
        ("normlab.experiments", "experiments"),
    ],
)
def test_the_longest_prefix_decides(module: str, kind: str) -> None:
    assert LAYERS[layer_of(module)][0] == kind
