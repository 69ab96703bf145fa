"""normlab.display: show_source's textbook listing (maths and forward, input checks elided,
the rest folded), results tables, and glue, which records a value as myst-nb's glue does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from normlab import show_source
from normlab.display import ELIDED
from normlab.layers import AffineLikeLinear, FiLMNorm, PatchNormConv2d

ROOT = Path(__file__).resolve().parents[1]


def test_a_class_shows_its_maths_and_forward_only() -> None:
    view = show_source(FiLMNorm)
    assert view.listing.startswith("class FiLMNorm(nn.Module):")
    assert "def forward(" in view.listing
    assert (
        "def __init__(" not in view.listing
        and "def reset_parameters(" not in view.listing
    )
    assert view.maths and r"\mathrm{FiLMNorm}(x) = \mathrm{LN}(x)" in view.maths[0]
    assert (
        view.folded and len(view.listing.splitlines()) < len(view.code.splitlines()) / 2
    )


def test_a_named_method_replaces_forward() -> None:
    view = show_source(FiLMNorm, "reset_parameters")
    assert (
        "def reset_parameters(" in view.listing and "def forward(" not in view.listing
    )


def test_input_checks_are_elided_and_kept_in_the_full_source() -> None:
    view = show_source(PatchNormConv2d.forward)
    assert ELIDED in view.listing and "raise" not in view.listing
    assert "raise TypeError" in view.code
    assert "return out.squeeze(0) if unbatched else out" in view.listing


def test_the_html_folds_the_full_source_and_typesets_the_maths() -> None:
    html = show_source(AffineLikeLinear)._repr_html_()
    assert (
        html.count("<details>") == 1
        and "Full source of <code>AffineLikeLinear</code>" in html
    )
    assert r"\[z = \frac{W x + b}{\sqrt{\lVert x \rVert^2 + 1}}\]" in html
    assert (
        "white-space:pre-wrap" in html
    )  # long lines wrap in the column, no sideways scroll


def test_a_listing_without_anything_left_out_is_not_folded() -> None:
    view = show_source(PatchNormConv2d.patch_sq_norm)
    assert not view.folded and "<details>" not in view._repr_html_()


def test_bad_members_are_refused() -> None:
    with pytest.raises(ValueError, match="members"):
        show_source(FiLMNorm, "no_such_method")
    with pytest.raises(TypeError, match="members"):
        show_source(PatchNormConv2d.forward, "forward")


def test_table_renders_html_with_its_caption_and_rounded_floats():
    import pandas as pd
    from normlab.display import table

    html = table(
        pd.DataFrame({"arm": ["a", "b"], "acc": [0.91234, float("nan")]}),
        digits=2,
        caption="8x8 digits <stand-in>",
    ).to_html()
    assert 'class="normlab-table"' in html
    assert "0.91" in html and "0.912" not in html
    assert "8x8 digits &lt;stand-in&gt;" in html
    assert "nan" not in html.lower()


def test_table_names_a_wrong_argument():
    import pytest
    from normlab.display import table

    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        table([1, 2])


def test_wrapped_lines_keep_their_indentation() -> None:
    import html as html_lib

    from normlab.display import HANGING, _highlight

    code = 'def f(x):\n    """A docstring line.\n\n        indented more."""\n    return x\n'
    out = _highlight(code)
    spans = re.findall(
        r'<span style="display:block;padding-left:(\d+)ch;text-indent:-(\d+)ch">'
        r"(.*?)\n</span>",
        out,
        flags=re.S,
    )
    lines = code.splitlines()
    assert len(spans) == len(lines)
    for (pad, indent, body), line in zip(spans, lines):
        own = len(line) - len(line.lstrip(" "))
        # a wrapped line continues HANGING columns right of its own indentation
        assert int(pad) == int(indent) == own + HANGING
        assert html_lib.unescape(re.sub(r"<[^>]+>", "", body)) == line


def test_table_shows_each_normaliser_by_its_registered_name():
    import pandas as pd
    from normlab import normalisers
    from normlab.display import table

    frame = pd.DataFrame(
        {"normaliser": ["none", "affine_like", "other"], "x": [1, 2, 3]}
    )
    html = table(frame).to_html()
    assert normalisers.label("none") in html and ">none<" not in html
    assert normalisers.label("affine_like") in html and ">other<" in html
    indexed = table(frame.set_index("normaliser"), index=True).to_html()
    assert normalisers.label("affine_like") in indexed


# ------------------------------------------------------------------- glue without myst-nb


@pytest.fixture
def shell() -> Iterator[Any]:
    """IPython's shell, with the PNG display of figures that a kernel's inline backend sets."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats
    from matplotlib.figure import Figure

    shell = InteractiveShell.instance()
    select_figure_formats(shell, {"png"})
    yield shell
    shell.display_formatter.formatters["image/png"].pop(Figure, None)


def glued(record: Callable[..., Any], value: Any, display: bool) -> list[tuple]:
    """The outputs (MIME bundle, metadata) that ``record("name", value, display)`` emits."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        record("name", value, display=display)
    return [(output.data, output.metadata) for output in captured.outputs]


def values() -> dict[str, Any]:
    """A float, a string, a table and a figure: the kinds of value the chapters glue."""
    import pandas as pd
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1, 1))
    figure.add_subplot().plot([0, 1], [1, 0])
    frame = pd.DataFrame({"normaliser": ["none", "layernorm"], "accuracy": [0.9, 0.8]})
    return {"float": 2.5, "string": "affine-like", "table": frame, "figure": figure}


def test_glue_records_a_value_that_jupyter_does_not_show(shell: Any) -> None:
    from normlab.display import GLUE_PREFIX, glue

    hidden = glued(glue, 2.5, display=False)
    assert hidden == [
        (
            {GLUE_PREFIX + "text/plain": "2.5"},
            {"scrapbook": {"name": "name", "mime_prefix": GLUE_PREFIX}},
        )
    ]
    assert glued(glue, 2.5, display=True) == [
        ({"text/plain": "2.5"}, {"scrapbook": {"name": "name", "mime_prefix": ""}})
    ]
    (bundle, _), *_ = glued(glue, values()["figure"], display=True)
    assert set(bundle) == {"text/plain", "image/png"}


@pytest.mark.parametrize("display", [False, True])
@pytest.mark.parametrize("kind", ["float", "string", "table", "figure"])
def test_glue_emits_what_myst_nb_emits(shell: Any, kind: str, display: bool) -> None:
    """The same outputs as myst-nb's ``glue``, so that the book's build finds every value."""
    myst_glue = pytest.importorskip("myst_nb.ext.glue")
    from normlab.display import GLUE_PREFIX, glue

    assert GLUE_PREFIX == myst_glue.GLUE_PREFIX
    value = values()[kind]
    ours = glued(glue, value, display)
    assert ours and ours == glued(myst_glue.glue, value, display)


def test_the_book_build_finds_a_value_glued_without_myst_nb(tmp_path: Path) -> None:
    """A one-page Sphinx build with myst-nb (what Jupyter Book runs) executes a notebook
    that glues with normlab's ``glue`` and pastes the values into its text; ``-W`` fails the
    build on a glue name it cannot find."""
    pytest.importorskip("myst_nb")
    nbf = nbformat.v4

    source = tmp_path / "source"
    source.mkdir()
    (source / "conf.py").write_text(
        'extensions = ["myst_nb"]\nnb_execution_mode = "force"\n'
    )
    notebook = nbf.new_notebook(
        cells=[
            nbf.new_code_cell(
                "from normlab.display import glue\n\n"
                'glue("ratio", 2.5)\nglue("count", 7, display=True)'
            ),
            nbf.new_markdown_cell(
                "# Glued\n\nThe ratio is {glue:text}`ratio:.2f`; the count is {glue}`count`."
            ),
        ],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.write(notebook, source / "index.ipynb")
    # The kernel imports this checkout's normlab.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "companion")}
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html"]
        + [str(source), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    page = (tmp_path / "html" / "index.html").read_text()
    assert 'The ratio is <span class="pasted-text">2.50</span>' in page
    assert re.search(r"the count is <span[^>]*>7</span>", page)
    # Only the value glued with display=True is a cell output.
    outputs = re.findall(r'class="cell_output.*?<pre>(.*?)</pre>', page, flags=re.S)
    assert [re.sub(r"<[^>]+>", "", o).strip() for o in outputs] == ["7"]


def test_a_saved_sets_tasks_are_named_by_the_dataset_that_served_them() -> None:
    """The gate sets' ``mnist`` on the CPU is real MNIST (their ``source``), not the 8x8
    digits the profile would serve it from by default."""
    import pandas as pd
    from normlab.display import data_sources, reader_names

    runs = pd.DataFrame(
        {
            "data": ["mnist", "mnist", "mnist_restyled", "cifar10", "cifar10"],
            "source": ["mnist_5k", "mnist_5k", "digits", "a", "b"],
        }
    )
    sources = data_sources(runs)
    assert sources == {"mnist": "mnist_5k", "mnist_restyled": "digits"}
    summary = pd.DataFrame({"data": ["mnist", "mnist_restyled"], "mean": [0.9, 0.7]})
    named = reader_names(summary, "cpu", sources)["data"].tolist()
    assert named == ["real MNIST, 5,000 digits", "restyled 8×8 digits"]
    assert reader_names(summary, "cpu")["data"].iloc[0] == "8×8 digits"
    assert data_sources(summary) == {}
