"""normlab.normalisers: one registry, and every normaliser name the book uses is in it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from matplotlib.colors import to_rgb
from normlab import experiments, figures, normalisers
from normlab.experiments import part1, part2
from normlab.layers import AffineLikeLinear, AutoNorm, L2Norm, NormLikeLinear
from normlab.models import mlp_for
from normlab.normalisers import NORMALISERS, PALETTE, PART1, PART2
from torch import nn

BOOK = Path(__file__).resolve().parents[1] / "book"
# Calls whose first argument is a normaliser name, and keywords whose value is one.
NAME_TAKERS = {
    "label",
    "colour",
    "norm_layer",
    "resolve_norm_layer",
    "mlp_for",
    "make_layer",
}
NAME_KEYWORDS = {"normaliser", "norm_layer", "kind"}


_BOOK_PART1: tuple[str, ...] = part1.BOOK_NORMALISERS
_BOOK_PART2: tuple[str, ...] = (
    "frozen_ln",
    "dyt",
    "adanorm",
    "film",
    "autonorm",
    "autonorm_random",
    "autonorm_s",
    "autonorm_s_low",
)


def test_the_canonical_names_in_book_order() -> None:
    # The names the chapters' prose walks through, in its order; a new entry may go anywhere.
    assert tuple(n for n in PART1 if n in _BOOK_PART1) == _BOOK_PART1
    assert tuple(n for n in PART2 if n in _BOOK_PART2) == _BOOK_PART2
    assert normalisers.names() == PART1 + PART2
    assert normalisers.names(1) == PART1 and normalisers.names(2) == PART2
    assert all(NORMALISERS[n].part == 1 for n in PART1) and all(
        NORMALISERS[n].part == 2 for n in PART2
    )
    with pytest.raises(
        ValueError, match="normaliser='affine-like' is not known; expected one of none"
    ):
        normalisers.get("affine-like")
    with pytest.raises(ValueError, match="part"):
        normalisers.names(3)
    with pytest.raises(TypeError):
        NORMALISERS["l2"] = NORMALISERS["none"]  # read-only


def _check_part(part: tuple[str, ...]) -> None:
    """One part's figures tell its normalisers apart: distinct (colour, line style) pairs,
    distinct colours while the palette lasts, and distinct labels."""
    styles = [(normalisers.colour(n), normalisers.linestyle(n)) for n in part]
    assert len(set(styles)) == len(styles)
    colours = [c for c, _ in styles]
    assert set(colours) <= set(PALETTE)
    assert len(set(colours)) == min(len(colours), len(PALETTE))
    labels = [normalisers.label(n) for n in part]
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("part", [PART1, PART2])
def test_colours_and_labels_are_distinct_within_a_part(part: tuple[str, ...]) -> None:
    _check_part(part)


def test_palette_is_okabe_ito() -> None:
    # Okabe & Ito (2008), in 0-255 RGB: the published values, checked independently of the hex strings.
    published = [
        (0, 0, 0),
        (230, 159, 0),
        (86, 180, 233),
        (0, 158, 115),
        (240, 228, 66),
        (0, 114, 178),
        (213, 94, 0),
        (204, 121, 167),
    ]
    assert [tuple(round(255 * c) for c in to_rgb(h)) for h in PALETTE] == published
    assert normalisers.colour("layernorm") == normalisers.colour(
        "frozen_ln"
    )  # one concept, one colour


@pytest.mark.parametrize(
    "name, linear, norm",
    [
        ("none", nn.Linear, None),
        ("batchnorm", nn.Linear, nn.BatchNorm1d),
        ("layernorm", nn.Linear, nn.LayerNorm),
        ("rmsnorm", nn.Linear, nn.RMSNorm),
        ("l2", nn.Linear, L2Norm),
        ("norm_like", NormLikeLinear, None),
        ("affine_like", AffineLikeLinear, None),
    ],
)
def test_part1_pairs_build_the_mlp(name: str, linear: type, norm: type | None) -> None:
    linear_layer, norm_layer = NORMALISERS[name].pair
    assert linear_layer is linear
    assert (norm_layer is None) == (norm is None)
    model = mlp_for(name, in_features=6, num_classes=3, width=5, depth=2)
    assert [type(m) for m in model.modules() if isinstance(m, nn.Linear)] == [
        linear
    ] * 3
    assert len(
        [m for m in model.hidden if not isinstance(m, (nn.Linear, nn.Tanh))]
    ) == (2 if norm else 0)
    assert all(
        isinstance(m, norm)
        for m in model.hidden
        if not isinstance(m, (nn.Linear, nn.Tanh))
    )


def test_l2_norm_factory_normalises_the_trailing_shape() -> None:
    x = torch.randn(4, 3, 2, 5, dtype=torch.float64)
    y = normalisers.l2_norm((2, 5))(x)
    torch.testing.assert_close(
        y, x / x.flatten(2).norm(dim=-1)[..., None, None], rtol=1e-12, atol=0
    )
    torch.testing.assert_close(
        normalisers.l2_norm(5)(x), x / x.norm(dim=-1, keepdim=True), rtol=1e-12, atol=0
    )


def test_part2_entries_carry_the_schedule_and_gate() -> None:
    rules = {n: NORMALISERS[n].freeze_rule for n in PART2}
    assert rules == {
        **dict.fromkeys(PART2),
        "autonorm_s": "high",
        "autonorm_s_low": "low",
    }
    assert {n for n in PART2 if NORMALISERS[n].gated} == {
        "autonorm",
        "autonorm_random",
        "autonorm_s",
        "autonorm_s_low",
    }
    assert all(
        isinstance(normalisers.norm_layer(n)(4), AutoNorm)
        for n in PART2
        if NORMALISERS[n].gated
    )
    assert not any(NORMALISERS[n].gated for n in PART1)


def test_bad_entries_are_refused() -> None:
    with pytest.raises(ValueError, match="colour"):
        normalisers.Normaliser(
            name="x", part=1, label="x", colour="#123456", norm_layer=None
        )
    with pytest.raises(ValueError, match="part"):
        normalisers.Normaliser(
            name="x", part=3, label="x", colour=PALETTE[0], norm_layer=None
        )
    with pytest.raises(ValueError, match="freeze_rule"):
        normalisers.Normaliser(
            name="x",
            part=2,
            label="x",
            colour=PALETTE[0],
            norm_layer=AutoNorm,
            freeze_rule="sometimes",
        )
    with pytest.raises(ValueError, match="linestyle"):
        normalisers.Normaliser(
            name="x", part=1, label="x", linestyle="~", norm_layer=None
        )
    taken = normalisers.Normaliser(
        name="y", part=1, label="y", colour=PALETTE[0], linestyle="-", norm_layer=None
    )
    with pytest.raises(ValueError, match="'z'.*expected a free pair"):
        normalisers._table(taken, dataclasses.replace(taken, name="z"))


def test_styles_scale_past_the_palette() -> None:
    """An entry without a colour takes its part's first free (colour, line style) pair:
    the palette's colours solid, then dashed, then dotted; the named ones keep theirs."""
    entries = [
        normalisers.Normaliser(name=f"n{i}", part=1, label=f"N{i}", norm_layer=None)
        for i in range(20)
    ]
    table = normalisers._table(*NORMALISERS.values(), *entries)
    assert all(table[n] == NORMALISERS[n] for n in NORMALISERS)
    new = [(table[e.name].colour, table[e.name].linestyle) for e in entries]
    free = [c for c in PALETTE if c not in {normalisers.colour(n) for n in PART1}]
    assert new[: len(free)] == [(c, "-") for c in free]
    assert new[len(free) : len(free) + len(PALETTE)] == [(c, "--") for c in PALETTE]
    assert new[len(free) + len(PALETTE) :][0] == (PALETTE[0], ":")
    assert new[-1][1] == "-."
    pairs = [(e.colour, e.linestyle) for e in table.values() if e.part == 1]
    assert len(set(pairs)) == len(pairs)


class _ScratchNorm(nn.Module):
    """A new normaliser as a contributor would add it: divide by the largest |x|."""

    def __init__(self, normalized_shape: int | tuple[int, ...], **_: object) -> None:
        super().__init__()
        shape = (
            (normalized_shape,)
            if isinstance(normalized_shape, int)
            else normalized_shape
        )
        self.dims = tuple(range(-len(shape), 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.abs().amax(dim=self.dims, keepdim=True).clamp_min(1e-12)


def _register(monkeypatch: pytest.MonkeyPatch, entry: normalisers.Normaliser) -> None:
    """Add ``entry`` to the registry for one test, as one more entry in NORMALISERS would."""
    table = normalisers._table(*NORMALISERS.values(), entry)
    monkeypatch.setattr(normalisers, "NORMALISERS", table)
    for attr, part in (("PART1", 1), ("PART2", 2)):
        names = tuple(n for n, e in table.items() if e.part == part)
        monkeypatch.setattr(normalisers, attr, names)


def test_a_new_normaliser_is_one_layer_and_one_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Everything that enumerates or looks up normalisers reads the registry: a layer and
    its entry reach the names, labels and colours, the models' factories, the figures'
    colours and the tables' labels, and pass the checks every entry gets."""
    from normlab.display import table
    from normlab.figures import colours
    from normlab.models import ViTConfig, ViTLite

    entry = normalisers.Normaliser(
        name="scratch",
        part=1,
        label="Scratch",
        norm_layer=_ScratchNorm,
        description="x / max |x|",
    )
    _register(monkeypatch, entry)
    assert normalisers.names(1)[-1] == "scratch"
    assert normalisers.get("scratch").norm_layer is _ScratchNorm
    free = normalisers.colour("scratch")
    _check_part(normalisers.names(1))
    mlp = mlp_for("scratch", in_features=6, num_classes=3, width=5, depth=2)
    assert sum(isinstance(m, _ScratchNorm) for m in mlp.modules()) == 2
    vit = ViTLite(
        ViTConfig(img_size=8, in_chans=1, patch_size=2, dim=16, depth=1, heads=2),
        "scratch",  # a drop-in name goes straight to the norm_layer= factory
    )
    assert any(isinstance(m, _ScratchNorm) for m in vit.modules())
    assert vit(torch.rand(2, 1, 8, 8)).shape[0] == 2
    assert colours(["scratch", "sgd"])["scratch"] == free
    frame = pd.DataFrame({"normaliser": ["scratch", "l2"], "acc": [0.5, 0.6]})
    assert list(table(frame).data["normaliser"]) == ["Scratch", "L2"]


# --- every name in use is registered -------------------------------------------------------


def _names_in_code(source: str) -> set[str]:
    """String literals used as normaliser names: the first argument of a name-taking call
    (``norm_layer("dyt")``), a name keyword (``normaliser="l2"``) or a ``"normaliser"`` key."""
    found: set[str] = set()

    def literal(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            registry_get = (
                func == "get"
                and getattr(node.func, "value", None) is not None
                and getattr(node.func.value, "id", "") == "normalisers"
            )
            if (func in NAME_TAKERS or registry_get) and node.args:
                literal(node.args[0])
            for keyword in node.keywords:
                if keyword.arg in NAME_KEYWORDS:
                    literal(keyword.value)
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "normaliser":
                    literal(value)
                    if isinstance(value, (ast.List, ast.Tuple)):
                        for item in value.elts:
                            literal(item)
    return found


def _misspelled(source: str) -> set[str]:
    """Lookup keys (a subscript, a dict key, a compared value) that spell a registered name
    another way: ``sizes["affine-like"]``, ``{"plain": ...}`` is fine, ``kind == "Norm_Like"`` is not."""
    keys: list[ast.AST] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            keys.append(node.slice)
        elif isinstance(node, ast.Dict):
            keys.extend(k for k in node.keys if k is not None)
        elif isinstance(node, ast.Compare):
            keys.extend([node.left, *node.comparators])
    literals = {
        k.value
        for k in keys
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }
    return {
        s
        for s in literals
        if s not in NORMALISERS and s.lower().replace("-", "_") in NORMALISERS
    }


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = [
        line
        for cell in cells
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
    ]
    # IPython magics become ``pass`` at the same indentation, so the code still parses.
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in lines
    )


def test_the_scanner_finds_names() -> None:
    code = (
        'norm_layer("dyt"); mlp_for("l2", width=3); f(normaliser="film"); x.get("none")\n'
        '{"normaliser": ["autonorm", "batchnorm"]}; g("frozen_ln"); make_layer(kind="norm-like", n=2)'
    )
    assert _names_in_code(code.replace("x.get", "normalisers.get")) == {
        "dyt",
        "l2",
        "film",
        "none",
        "autonorm",
        "batchnorm",
        "norm-like",
    }
    assert "none" not in _names_in_code(
        code
    )  # any other .get() is not a registry lookup
    keys = 'sizes["affine-like"]; {"Norm_Like": 1, "plain": 2, "layernorm": 3}; k == "LayerNorm"; print("affine-like")'
    assert _misspelled(keys) == {"affine-like", "Norm_Like", "LayerNorm"}


def test_experiment_grids_use_registered_names() -> None:
    assert part1.NORMALISERS == PART1 and part2.NORMALISERS == PART2
    for name in experiments.names():
        experiment = experiments.get(name)
        for profile in experiment.profiles:
            grid = experiment.grid(profile)
            used = set(grid.axes.get("normaliser", []))
            if "normaliser" in grid.fixed:
                used.add(grid.fixed["normaliser"])
            assert used <= set(NORMALISERS), (
                f"{name}/{profile}: {used - set(NORMALISERS)} not in the registry"
            )


@pytest.mark.parametrize(
    "module",
    [
        figures.column,
        figures.curves,
        figures.heatmaps,
        figures.theory,
        figures.part1,
        part1,
        part2,
    ],
    ids=lambda m: m.__name__,
)
def test_package_figures_and_experiments_use_registered_names(module: object) -> None:
    source = inspect.getsource(module)
    assert _names_in_code(source) <= set(NORMALISERS)
    assert not _misspelled(source)
    assert set(figures.LAYER_KINDS) <= set(PART1)


@pytest.mark.parametrize("notebook", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.name)
def test_chapter_notebooks_use_registered_names(notebook: Path) -> None:
    code = _notebook_code(notebook)
    unknown = _names_in_code(code) - set(NORMALISERS)
    assert not unknown, (
        f"{notebook.name} uses normaliser names missing from normlab.normalisers: {unknown}"
    )
    assert not _misspelled(code), (
        f"{notebook.name} spells registered names another way: {_misspelled(code)}"
    )
