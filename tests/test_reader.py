"""Reader notebooks (normlab_book.reader, the book's tooling): every chapter converts to plain Jupyter Markdown with its
glued values filled in, from a fabricated build that holds them as myst-nb leaves them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml
from normlab_book import reader

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
GLUE_TEXT = re.compile(r"\{glue:text\}`(?P<name>[^`:]+)(?::(?P<spec>[^`]*))?`")
GLUE_MD = re.compile(r"\{glue:md\}`(?P<name>[^`:]+)(?::[^`]*)?`")
#: The directive form, a glued block: ```{glue:md} name
GLUE_MD_BLOCK = re.compile(r"```\{glue:md\}[ \t]+(?P<name>\S+)")
# MyST that Jupyter would show as raw text: a role, a directive's fence or option, a target
MYST = re.compile(
    r"\{[\w:.-]+\}`|^\s*:{3,}|^\s*`{3,}\{|^\s*:(label|class|name):|^\([^()\s]+\)=\s*$",
    re.M,
)


def chapter_sources() -> list[Path]:
    return [c.path for c in reader.read_book(ROOT).chapters]


def markdown_of(notebook: dict) -> str:
    """The Markdown cells' text, fenced code left out (it may show anything); a directive's
    fence (```` ```{name} ````) is kept, to be found."""
    text = "\n\n".join(
        c["source"] for c in notebook["cells"] if c["cell_type"] == "markdown"
    )
    return re.sub(r"^(`{3,})(?!\{)[^\n]*\n.*?^\1[ \t]*$", "", text, flags=re.M | re.S)


def fabricate(build: Path) -> dict[str, list[str]]:
    """An executed copy of each chapter under ``build/jupyter_execute`` with a value for
    every name its text glues: half in the ``.glue.json`` that myst-nb writes, half as hidden
    display outputs of the notebook. Returns chapter -> the texts that must appear."""
    expected: dict[str, list[str]] = {}
    for n, path in enumerate(chapter_sources()):
        nb = json.loads(path.read_text())
        text = "".join(
            "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
        )
        bundles, values, shown = {}, {}, []
        for i, match in enumerate(GLUE_TEXT.finditer(text)):
            spec = match["spec"] or ""
            whole = spec[-1:] in ("", "s", "d")
            value = values.setdefault(
                match["name"], 100 * n + i + (0 if whole else 0.4567)
            )
            bundles[match["name"]] = {"text/plain": repr(value)}
            shown.append(format(value, spec))
        found_md = [*GLUE_MD.finditer(text), *GLUE_MD_BLOCK.finditer(text)]
        for i, match in enumerate(found_md):
            words = values.setdefault(match["name"], f"**verdict {n}.{i}**")
            bundles[match["name"]] = {
                "text/plain": "<IPython.core.display.Markdown object>",
                "text/markdown": words,
            }
            shown.append(words)
        names = sorted(bundles)
        as_json = {k: _output(k, bundles[k]) for k in names[::2]}
        in_notebook = [_output(k, bundles[k]) for k in names[1::2]]
        executed = build / reader.EXECUTED / path.relative_to(ROOT)
        executed.parent.mkdir(parents=True, exist_ok=True)
        code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        code["outputs"] = in_notebook
        executed.write_text(json.dumps(nb))
        if as_json:
            executed.with_suffix(".glue.json").write_text(json.dumps(as_json))
        expected[path.stem] = shown
    return expected


def _output(name: str, bundle: dict) -> dict:
    """A hidden glue output, as ``glue(name, value, display=False)`` records it."""
    return {
        "output_type": "display_data",
        "metadata": {"scrapbook": {"name": name, "mime_prefix": reader.GLUE_PREFIX}},
        "data": {reader.GLUE_PREFIX + k: v for k, v in bundle.items()},
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    build = tmp_path_factory.mktemp("build")
    expected = fabricate(build)
    assert reader.main([str(build), "--root", str(ROOT)]) == 0
    return build, expected


def test_every_chapter_becomes_plain_markdown_with_its_glued_values(
    built: tuple[Path, dict[str, list[str]]],
) -> None:
    build, expected = built
    written = sorted((build / reader.NOTEBOOKS).glob("*.ipynb"))
    assert [p.stem for p in written] == [p.stem for p in chapter_sources()]
    assert sum(map(len, expected.values())) > 200  # the book's ~250 glued values
    for path in written:
        text = path.read_text()
        assert (build / "html" / reader.NOTEBOOKS / path.name).read_text() == text
        nbformat.validate(nbformat.reads(text, as_version=4))
        notebook = json.loads(text)
        markdown = markdown_of(notebook)
        left = sorted({m.group(0).strip() for m in MYST.finditer(markdown)})
        assert left == [], f"{path.name}: MyST left: {left}"
        missing = [shown for shown in expected[path.stem] if shown not in markdown]
        assert missing == [], f"{path.name}: glued values not filled in: {missing[:5]}"
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
        source = json.loads((ROOT / "book" / path.name).read_text())
        install = next(c for c in source["cells"] if c["cell_type"] == "code")
        assert notebook["cells"][0]["source"] == "".join(install["source"])


def test_cells_the_book_removes_are_dropped_except_the_install_cell(
    built: tuple[Path, dict[str, list[str]]],
) -> None:
    build, _ = built
    source = json.loads((ROOT / "book" / "06_fc_normalisers.ipynb").read_text())
    removed = [
        "".join(c["source"])
        for c in source["cells"]
        if "remove-cell" in c["metadata"].get("tags", [])
    ]
    assert len(removed) >= 2  # the install cell and the cell that glues the numbers
    cells = json.loads(
        (build / reader.NOTEBOOKS / "06_fc_normalisers.ipynb").read_text()
    )
    sources = [c["source"] for c in cells["cells"]]
    assert sources[0] == removed[0] and not set(removed[1:]) & set(sources)


def test_solutions_fold_and_a_gated_solutions_code_is_collapsed(
    built: tuple[Path, dict[str, list[str]]],
) -> None:
    build, _ = built
    cells = json.loads((build / reader.NOTEBOOKS / "01_normalisers.ipynb").read_text())[
        "cells"
    ]
    text = [c["source"] for c in cells]
    heading = "**Exercise 1.2 (When does LayerNorm's epsilon matter?)**\n\nWith "
    assert any(t.startswith(heading) for t in text)
    gated = next(i for i, t in enumerate(text) if "Solution to Exercise 1.2" in t)
    assert text[gated].startswith(
        "<details>\n<summary>Solution to Exercise 1.2</summary>\n\n"
    )
    assert text[gated].endswith("\n\n</details>")
    code = cells[gated + 1]
    assert code["source"].startswith("# Solution to Exercise 1.2\n")
    assert code["metadata"]["jupyter"] == {
        "source_hidden": True,
        "outputs_hidden": True,
    }
    summary = "> **Summary**\n>\n> - BatchNorm"
    assert any(t.startswith(summary) for t in text[gated + 2 :])  # after the exercises
    assert text[-1].startswith("## References\n\n- ") and "- Jimmy Lei Ba, " in text[-1]
    hidden = [
        c for c in cells if c["metadata"].get("jupyter") == {"source_hidden": True}
    ]
    assert hidden and "import normlab" in hidden[0]["source"]  # the book's hide-input


def test_a_missing_glue_name_names_the_chapter_and_the_name(
    tmp_path: Path, capsys
) -> None:
    book = reader.read_book(ROOT)
    chapter = book.chapters[0]
    nb = json.loads(chapter.path.read_text())
    missing = (
        r"chapter 01_normalisers: glue name 'ch01_\w+' is not in the executed notebook"
    )
    with pytest.raises(reader.ReaderError, match=missing):
        reader.convert(nb, chapter, {}, book)
    assert reader.main([str(tmp_path), "--root", str(ROOT)]) == 1
    assert "01_normalisers" in capsys.readouterr().err
    assert not (tmp_path / reader.NOTEBOOKS).exists()


@pytest.mark.parametrize(
    "plain, spec",
    [
        ("0.123456", ".3f"),
        ("0.123456", ""),
        ("3", "d"),
        ("3", ".1f"),
        ("0.0153", ".1%"),
        ("-0.5", "+.2f"),
        ("12345.678", ",.0f"),
        ("'a string'", "s"),
        ("<IPython.core.display.Markdown object>", "s"),
        ("np.float64(0.25)", "s"),
        ("1e-07", ".2e"),
    ],
)
def test_glue_text_formats_as_myst_nb_does(plain: str, spec: str) -> None:
    variables = pytest.importorskip("myst_nb.core.variables")
    assert reader.format_plain_text(plain, spec) == variables.format_plain_text(
        plain, spec
    )


def synthetic(*markdown: str) -> dict:
    """A chapter notebook of the given Markdown cells after an install cell."""
    install = '# install\nimport sys\nif "google.colab" in sys.modules:\n    pass\n'
    cells = [nbformat.v4.new_code_cell(install)]
    cells[0].metadata["tags"] = ["remove-cell"]
    cells += [nbformat.v4.new_markdown_cell(text) for text in markdown]
    return {"cells": cells, "metadata": {}}


def convert(*markdown: str, glued: dict | None = None) -> list[str]:
    """The converted Markdown cells (a list of references last, when anything is cited)."""
    book = reader.read_book(ROOT)
    chapter = reader.Chapter(ROOT / "book" / "99_synthetic.ipynb", 99)
    out = reader.convert(synthetic(*markdown), chapter, glued or {}, book)
    return [c["source"] for c in out["cells"][1:]]


def test_admonitions_become_quotes_with_maths_kept_whole() -> None:
    (quote,) = convert(
        ":::{note}\nA sum $a +\nb$ and\n\n$$\nx = 1\n$$\n:::",
    )
    assert quote == "> **Note**\n>\n> A sum $a + b$ and\n>\n> $$ x = 1 $$"
    (folded,) = convert(":::{admonition} Why\n:class: dropdown\n\nBecause.\n:::")
    assert folded == "<details>\n<summary>Why</summary>\n\nBecause.\n\n</details>"


def test_roles_and_other_directives_become_their_plain_content() -> None:
    text, references = convert(
        "See {cite:t}`zhu2025dyt` and {ref}`ex-06-pair-kernel`, {doc}`appendix_reproducing`,"
        " {doc}`the first <01_normalisers>`, {math}`x^2`, {abbr}`SGD (stochastic gradient"
        " descent)` and {glue}`n`.\n\n```{figure} images/plot.png\n:name: fig-x\n\nA caption.\n```"
        "\n\n```{margin}\nAside.\n```\n\n```python\n{cite:p}`kept` in code\n```",
        glued={"n": {"text/plain": "7"}},
    )
    assert text == (
        "See Zhu et al. (2025) and [Exercise 6.1](06_fc_normalisers.ipynb), Reproducing "
        "results on a GPU, [the first](01_normalisers.ipynb), $x^2$, SGD (stochastic gradient"
        " descent) and 7.\n\n![A caption.](images/plot.png)\n\n*Fig. 99.1: A caption.*"
        "\n\nAside.\n\n```python\n{cite:p}`kept` in code\n```"
    )
    assert references.startswith("## References\n\n- Jiachen Zhu, Xinlei Chen, ")


@pytest.mark.parametrize(
    "markdown, problem",
    [
        ("{cite:p}`nobody2099`", "cites 'nobody2099'"),
        ("{ref}`no-such-label`", "label 'no-such-label'"),
        (":::{solution} no-such-exercise\n:::", "exercise 'no-such-exercise'"),
        ("```{solution-start} ex-01-eps\n```\nOpen.", "has no solution-end"),
        ("{glue:md}`x`", "glued 'x' has no text/markdown"),
    ],
)
def test_what_the_book_lacks_is_named(markdown: str, problem: str) -> None:
    with pytest.raises(reader.ReaderError, match=re.escape(problem)):
        convert(markdown, glued={"x": {"text/plain": "1"}})


def test_chapters_are_numbered_as_their_files() -> None:
    book = reader.read_book(ROOT)
    assert [c.number for c in book.chapters] == [int(c.name[:2]) for c in book.chapters]
    assert book.labels["ex-06-pair-kernel"] == ("Exercise 6.1", "06_fc_normalisers")


def test_the_colab_button_opens_the_reader_notebook() -> None:
    launch = CONFIG["launch_buttons"]
    options = {"repository_url": CONFIG["repository"]["url"], "launch_buttons": launch}
    app = SimpleNamespace(config=SimpleNamespace(html_theme_options=options))
    colab = {
        "text": "Colab",
        "url": "https://colab.research.google.com/github/x/y/blob/main/book/10_gate.ipynb",
    }
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [colab]}]}
    reader._colab_button(app, "book/10_gate", "page.html", context, None)
    slug = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    assert colab["url"] == (
        f"https://colab.research.google.com/github/{slug}/blob/"
        f"{launch['pages_branch']}/notebooks/10_gate.ipynb"
    )
    with pytest.raises(ValueError, match="repository_url must be a GitHub"):
        reader.colab_link(
            "https://colab.research.google.com", "https://gitlab.com/a/b", "main", "x"
        )


def test_a_glue_directive_pastes_its_value_as_a_block() -> None:
    (text,) = convert(
        "Before.\n\n```{glue:md} verdicts\n```\n\nAfter.",
        glued={"verdicts": {"text/markdown": "**A8**: inconclusive"}},
    )
    assert text == "Before.\n\n**A8**: inconclusive\n\nAfter."
