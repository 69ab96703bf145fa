"""Every public layer's docstring has an ``Examples::`` section, and its examples run."""

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
    # Every layer class a registered normaliser builds, however many there are, and the
    # convolutional ones the CNNs use.
    registered = {
        getattr(factory, "func", factory)
        for entry in normalisers.NORMALISERS.values()
        for factory in entry.pair
        if factory is not None
    }
    ours = {
        f for f in registered if isinstance(f, type) and f.__module__[:8] == "normlab."
    }
    assert ours and ours <= set(LAYERS)
    assert {layers.PatchNormConv2d, layers.AutoNorm} <= set(LAYERS)


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
