"""A new normaliser is one class and one registry entry, and the package takes it whole.

A scratch copy of the package gets ScaleNorm (Nguyen and Salazar, 2019) as two Part I
entries, written into ``normalisers.py`` as a contributor would write them; a fresh
interpreter then imports every experiment, builds the quick grids with the new names in
them, runs one quick run and one CNN, and draws a figure of nine Part I names, while the
grids of the book's sets keep their run ids.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from normlab import experiments
from normlab.experiments.grid import run_id

PACKAGE = Path(__file__).resolve().parents[1] / "companion" / "normlab"
#: The sets saved with the book, whose grids must not move when a name is registered.
SHIPPED = ("fc_normalisers", "batch_size", "cnn_normalisers")

SCALENORM = '''
class ScaleNorm(nn.Module):
    """y = g x / max(|x|, eps) over the trailing ``normalized_shape`` (or ``dims``)."""

    def __init__(self, normalized_shape, dims=None, learn_gain=True, **_):
        super().__init__()
        shape = as_shape(normalized_shape)
        self.dims = dims or tuple(range(-len(shape), 0))
        gain = torch.tensor(float(math.prod(shape)) ** 0.5)
        self.g = nn.Parameter(gain, requires_grad=learn_gain)

    def forward(self, x):
        norm = torch.linalg.vector_norm(x, dim=self.dims, keepdim=True)
        return self.g * x / norm.clamp_min(1e-5)


'''
ENTRIES = """    Normaliser(
        name="scalenorm",
        part=1,
        label="ScaleNorm",
        norm_layer=ScaleNorm,
        conv=(CONV3X3, functools.partial(ScaleNorm, dims=(1, 2, 3))),
        description="one learned gain over x / |x|",
    ),
    Normaliser(
        name="scalenorm_fixed",
        part=1,
        label="ScaleNorm (fixed g)",
        norm_layer=functools.partial(ScaleNorm, learn_gain=False),
        description="x / |x| times a fixed sqrt(d)",
    ),
"""

CHECK = """
import hashlib, sys
import pandas as pd
import torch
from matplotlib.figure import Figure
from normlab import experiments, normalisers
from normlab.experiments import RunContext
from normlab.experiments.grid import run_id
from normlab.figures.part1 import draw_band
from normlab.models import cnn_for

new = ("scalenorm", "scalenorm_fixed")
assert normalisers.names(1)[-2:] == new, normalisers.names(1)
for name in {shipped!r}:
    experiment = experiments.get(name)
    quick = {{c["normaliser"] for c in experiment.grid("quick").configs()}}
    assert "scalenorm" in quick, (name, quick)
    ids = sorted(run_id(name, c) for c in experiment.grid("cpu").configs())
    print(name, hashlib.sha256("".join(ids).encode()).hexdigest())
    for profile in experiment.profiles:
        if profile != "quick":
            assert not set(new) & set(experiment.grid(profile).axes["normaliser"])

fc = experiments.get("fc_normalisers")
config = next(
    c for c in fc.grid("quick").configs(seeds=1) if c["normaliser"] == "scalenorm"
)
ctx = RunContext(device=torch.device("cpu"), checkpoint_dir={scratch!r})
record = fc.run_one(config, ctx)
assert 0.0 <= record["metrics"]["test_metric"] <= 1.0, record["metrics"]
assert cnn_for("scalenorm", in_channels=1, num_classes=3, channels=4)(
    torch.randn(2, 1, 8, 8)
).shape == (2, 3)

names = normalisers.names(1)
assert len(names) == 9
figure = Figure()
ax = figure.subplots()
for i, name in enumerate(names):
    table = pd.DataFrame({{"lr": [0.1, 1.0], "mean": [0.5, 0.6 + i / 100], "ci95": 0.01}})
    draw_band(ax, table, "lr", name)
ax.legend()
styles = {{(line.get_color(), line.get_linestyle()) for line in ax.get_lines()}}
assert len(styles) == 9, styles
figure.savefig({figure!r})
"""


def _shipped_digests() -> dict[str, str]:
    """Each shipped set's cpu grid, as a digest of its sorted run ids."""
    digests = {}
    for name in SHIPPED:
        configs = experiments.get(name).grid("cpu").configs()
        ids = sorted(run_id(name, c) for c in configs)
        digests[name] = hashlib.sha256("".join(ids).encode()).hexdigest()
    return digests


def _scratch_package(root: Path) -> Path:
    """A copy of the package with ScaleNorm registered in its ``normalisers.py``."""
    copy = root / "normlab"
    shutil.copytree(
        PACKAGE, copy, ignore=shutil.ignore_patterns("saved", "__pycache__")
    )
    source = copy / "normalisers.py"
    text = source.read_text(encoding="utf-8")
    table = "NORMALISERS: Mapping[str, Normaliser] = _table("
    part2 = (
        "    # Part II: one normaliser in every normalisation slot of a Transformer.\n"
    )
    assert text.count(table) == 1 and text.count(part2) == 1
    text = text.replace(table, SCALENORM + table).replace(part2, ENTRIES + part2)
    text = text.replace("import functools\n", "import functools\nimport math\n", 1)
    source.write_text(text, encoding="utf-8")
    return root


def test_registering_a_normaliser_reaches_every_part_i_experiment(
    tmp_path: Path,
) -> None:
    root = _scratch_package(tmp_path / "pkg")
    script = CHECK.format(
        shipped=SHIPPED,
        scratch=str(tmp_path / "runs"),
        figure=str(tmp_path / "nine.png"),
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "MPLBACKEND": "Agg",
        "NORMLAB_PROFILE": "quick",
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = dict(line.split() for line in done.stdout.splitlines())
    assert printed == _shipped_digests()
    assert (tmp_path / "nine.png").stat().st_size > 0
