"""The book's widgets work on ipywidgets 8 (what ``make lab`` installs) and 7.7 (what Colab
ships): each widget is built, shown and every control moved, under the installed ipywidgets,
and the same tests (with test_widgets.py and test_interactive.py) run again under ipywidgets
7.7.1 in a subprocess.

That second run needs ipywidgets 7.7.1 in a folder of its own, outside the environment::

    python -m pip install --no-deps --target /tmp/ipyw7 ipywidgets==7.7.1 \\
        widgetsnbextension==3.6.1 jupyterlab_widgets==1.1.1 ipython_genutils==0.2.0

(``NORMLAB_IPYWIDGETS7`` names another folder); without it, that test skips and says so.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import ipywidgets
import pytest
from normlab import figures
from normlab import widgets as w
from normlab.interactive import LiveAndStatic, widget_view
from test_gate_study import synthetic_gates
from test_widgets import fake_record

ROOT = Path(__file__).resolve().parents[1]
IPYWIDGETS7 = Path(os.environ.get("NORMLAB_IPYWIDGETS7", "/tmp/ipyw7"))
#: Set in the subprocess: the ipywidgets version it must be running.
EXPECTED = "NORMLAB_EXPECT_IPYWIDGETS"
VIEW = "application/vnd.jupyter.widget-view+json"


def positions(control: ipywidgets.Widget) -> list:
    """Every value a reader can give ``control``: each option, or a slider's ends and middle."""
    if hasattr(control, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in control.options]
    if isinstance(control, ipywidgets.Checkbox):
        return [not control.value, control.value]
    if isinstance(control, ipywidgets.FloatLogSlider):
        ends = (control.base**control.min, control.base**control.max)
        return [ends[0], control.base ** ((control.min + control.max) / 2), ends[1]]
    return [control.min, (control.min + control.max) / 2, control.max]


def test_the_expected_ipywidgets_runs() -> None:
    if EXPECTED not in os.environ:
        pytest.skip(f"{EXPECTED} is set only by test_the_widgets_work_on_ipywidgets_7")
    assert ipywidgets.__version__ == os.environ[EXPECTED]


def test_the_gate_widget_is_shown_and_every_control_redraws_it() -> None:
    grid = itertools.product(
        ["mnist", "mnist_restyled"], [0.1, 2.0], [1.0, 10.0], [False, True], [0, 2, 3]
    )
    runs = w.GateRuns(fake_record(*point) for point in grid)
    widget = w.GateWidget(runs)
    ui = widget.ui()
    shown = LiveAndStatic(ui, w.static_twin(runs))._repr_mimebundle_()
    assert shown[VIEW]["model_id"] == ui.model_id and "text/html" in shown
    assert set(widget.controls) == {f.name for f in dataclasses.fields(w.GateSetting)}
    for name, control in widget.controls.items():
        for value in positions(control):
            before, moved = widget.figure, control.value != value
            control.value = value  # what the reader's click does
            assert getattr(widget.setting, name) == value
            assert (widget.figure is not before) == moved, (name, value)


def test_the_entropy_explorer_draws_before_it_is_shown_and_on_every_move() -> None:
    explorer = figures.entropy_explorer(synthetic_gates(), "tau", "synthetic")
    live = explorer.live
    assert live.result is not None  # ipywidgets 7.7 alone would wait for the display
    view = widget_view(live)
    assert view[VIEW]["version_major"] == 2 and view[VIEW]["model_id"] == live.model_id
    for control in live.kwargs_widgets:
        for value in positions(control):
            before, moved = live.result, control.value != value
            control.value = value
            assert (live.result is not before) == moved, (control.description, value)
    assert live.result._suptitle.get_text() == "synthetic: tau 2, seed 1"


def test_chapter_3s_widget_redraws_on_every_control() -> None:
    """The chapter's own cell, run as written (``display`` aside)."""
    cells = json.loads((ROOT / "book" / "03_corrections.ipynb").read_text())["cells"]
    (cell,) = [
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "code" and "widgets.interactive(" in "".join(c["source"])
    ]
    space = {"plot_update_sizes": figures.plot_update_sizes, "display": lambda *a: None}
    exec(cell, space)
    ui = space["ui"]
    controls = [c for c in ui.kwargs_widgets if isinstance(c, ipywidgets.DOMWidget)]
    assert [c.description for c in controls] == [
        "|x|",
        "lr",
        "batch",
    ]  # not the fixed ones
    for control in controls:
        for value in positions(control):
            before, moved = ui.result, control.value != value
            control.value = value
            assert ui.result is not None and (ui.result is not before) == moved


def test_the_widgets_work_on_ipywidgets_7() -> None:
    """This file, test_widgets.py and test_interactive.py again, under ipywidgets 7.7.1."""
    if not (IPYWIDGETS7 / "ipywidgets").is_dir():
        pytest.skip(
            f"no ipywidgets 7.7.1 in {IPYWIDGETS7}: see this file's docstring to install it"
        )
    if EXPECTED in os.environ:
        pytest.skip("already the ipywidgets 7.7.1 run")
    env = {
        **os.environ,
        EXPECTED: "7.7.1",
        "PYTHONPATH": os.pathsep.join(
            filter(
                None,
                [
                    str(IPYWIDGETS7),
                    str(ROOT / "companion"),
                    str(ROOT / "tests"),
                    os.environ.get("PYTHONPATH"),
                ],
            )
        ),
    }
    tests = [
        "tests/test_widgets_versions.py",
        "tests/test_widgets.py",
        "tests/test_interactive.py",
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *tests,
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and " passed" in done.stdout, (
        done.stdout[-4000:] + done.stderr[-2000:]
    )
