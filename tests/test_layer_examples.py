"""Every public layer's docstring is written to torch's letter: its maths and the sections
``Args:``, ``Attributes:``, ``Shape:`` and ``Examples::``, whose examples run."""

from __future__ import annotations

import doctest
import inspect
import sys

import pytest
import torch
from normlab import layers, normalisers
from torch import nn

LAYERS = [
    getattr(layers, name)
    for name in layers.__all__
    if inspect.isclass(getattr(layers, name))
    and issubclass(getattr(layers, name), nn.Module)
]


def test_every_public_layer_is_covered() -> None:
    # Every layer class a registered normaliser builds, however many there are, in an MLP,
    # a Transformer or a CNN.
    registered = {
        getattr(factory, "func", factory)
        for entry in normalisers.NORMALISERS.values()
        for factory in (*entry.pair, *(entry.conv or ()))
        if factory is not None
    }
    ours = {
        f for f in registered if isinstance(f, type) and f.__module__[:8] == "normlab."
    }
    assert ours and ours <= set(LAYERS)
    assert {layers.PatchNormConv2d, layers.RMSNorm2d, layers.AutoNorm} <= ours


SECTIONS = ("Args:", "Attributes:", "Shape:", "Examples::")


@pytest.mark.parametrize("cls", LAYERS, ids=lambda cls: cls.__name__)
def test_docstring_has_torchs_sections_in_order(cls: type[nn.Module]) -> None:
    doc = cls.__doc__
    assert ":math:" in doc or ".. math::" in doc, f"{cls.__name__} states no maths"
    where = [doc.find(f"\n    {section}\n") for section in SECTIONS]
    missing = [s for s, at in zip(SECTIONS, where, strict=True) if at < 0]
    assert not missing, f"{cls.__name__} lacks {missing}"
    assert where == sorted(where), f"{cls.__name__}: sections out of torch's order"
    # each section has an indented body, not just its heading
    for section in SECTIONS:
        body = doc.split(f"\n    {section}\n", 1)[1]
        assert body.lstrip("\n").startswith("        "), (
            f"{cls.__name__}: {section} is empty"
        )


@pytest.mark.parametrize("cls", LAYERS, ids=lambda cls: cls.__name__)
def test_docstring_examples_run(cls: type[nn.Module]) -> None:
    assert "\n    Examples::\n" in cls.__doc__, (
        f"{cls.__name__} has no Examples:: section"
    )
    globs = dict(vars(sys.modules[cls.__module__]))
    (test,) = doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, globs=globs)
    assert test.examples
    torch.manual_seed(0)
    report: list[str] = []
    result = doctest.DocTestRunner().run(test, out=report.append)
    assert result.failed == 0, "".join(report)
