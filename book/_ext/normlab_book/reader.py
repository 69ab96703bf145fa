"""Reader notebooks: the chapters as plain notebooks for Jupyter, JupyterLab and Colab.

A chapter's source is MyST: glued numbers (``{glue:text}`ch10_h_slow:.3f```), citations,
exercises, solutions and admonitions that only the book's build understands; Jupyter,
JupyterLab and Colab show them as raw text. After ``make book`` has built (and so executed)
every chapter, ``python -m normlab_book.reader _build`` writes one reader notebook per chapter of
``_toc.yml`` into ``_build/notebooks/``, and a copy into ``_build/html/notebooks/``, which is
published with the HTML and which the Colab buttons open:

- a glued value is pasted from the executed chapter (myst-nb leaves it beside the executed
  notebook in ``_build/jupyter_execute/``), formatted as myst-nb formats it;
- a citation becomes "(Author, year)" or "Author (year)", with the works cited listed at
  the end; ``{ref}``, ``{numref}`` and ``{doc}`` become the text they show in the book;
- an exercise becomes a bold heading, a solution a folded ``<details>`` (a gated solution's
  code cells are collapsed), an admonition a block quote with a bold title, a figure or
  image a Markdown image; any other role or directive becomes its plain content;
- outputs are stripped; of the cells the book removes only the Colab install cell stays,
  first, installing what the chapter needs where ``google.colab`` is loaded.

:func:`setup` is the Sphinx extension (``_config.yml`` loads it as a local extension; the
book's tooling, not the installed package): it points each chapter's
Colab button at its reader notebook on the branch that publishes the HTML
(``launch_buttons.pages_branch``).
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import os
import re
import shutil
import stat
import sys
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab._io import write_text_atomic
from normlab._records import RecordError, loads

__all__ = [
    "NOTEBOOKS",
    "ReaderError",
    "Chapter",
    "Book",
    "read_book",
    "read_glue",
    "format_plain_text",
    "convert",
    "write_notebooks",
    "colab_link",
    "setup",
    "main",
]

#: The reader notebooks' folder, under the build folder and under its HTML.
NOTEBOOKS = "notebooks"
#: Where myst-nb leaves the executed notebooks and their glue data, under the build folder.
EXECUTED = "jupyter_execute"
#: The prefix of a glued MIME type that is recorded but not shown (``glue(display=False)``).
GLUE_PREFIX = "application/papermill.record/"
#: Admonition directives and the title each shows without one of its own.
ADMONITIONS = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
}
#: Cell tags of the book that Jupyter can honour, as the cell metadata that does so.
HIDDEN = {
    "hide-input": {"source_hidden": True},
    "hide-output": {"outputs_hidden": True},
    "hide-cell": {"source_hidden": True, "outputs_hidden": True},
    "remove-input": {"source_hidden": True},
    "remove-output": {"outputs_hidden": True},
}

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<arg>.*)$")
_OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*)$")
_TARGET = re.compile(r"^\((?P<label>[^()\s]+)\)=\s*$", re.M)
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.M)
# a role, or an inline code span, which is left as it is
_ROLE = re.compile(
    r"\{(?P<role>[A-Za-z][\w:+.-]*)\}`(?P<content>[^`]*)`|(?P<ticks>`+).+?(?P=ticks)",
    re.S,
)
# a code span, display maths or inline maths (unescaped dollars)
_SPAN = re.compile(r"(`+).+?\1|\$\$.+?\$\$|(?<![\\$])\$(?!\$).+?(?<![\\$])\$", re.S)
_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
_BIB_ENTRY = re.compile(r"@(\w+)\s*\{\s*([^,\s]+)\s*,")
_BIB_FIELD = re.compile(r"\s*(\w+)\s*=\s*")
_BIB_COMMA = re.compile(r"\s*,?")
_BIB_BARE = re.compile(r"[^,}\s]+")
# markers of a gated solution's start and end inside converted Markdown
_GATE = re.compile(r"\x00(?P<what>start|end) ?(?P<label>[^\x00]*)\x00")


class ReaderError(ValueError):
    """A chapter cannot be converted; the message names the chapter and what is missing."""


@dataclass(frozen=True)
class Chapter:
    """One notebook of the table of contents: its path, its number (None when the book does
    not number it) and its name (the file's stem, also the reader notebook's)."""

    path: Path
    number: int | None

    @property
    def name(self) -> str:
        return self.path.stem


@dataclass
class Book:
    """What a chapter's cross-references need from the whole book.

    ``chapters``: the notebooks of ``_toc.yml`` in order; ``titles``: docname (``book/02_x``)
    -> the page's first heading; ``labels``: a label -> (what ``{ref}`` shows, the chapter
    it is in or None); ``exercises``: chapter name -> the numbers of its exercises in order;
    ``bibliography``: citation key -> its BibTeX fields.
    """

    root: Path
    chapters: list[Chapter]
    titles: dict[str, str] = field(default_factory=dict)
    labels: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    exercises: dict[str, list[str]] = field(default_factory=dict)
    bibliography: dict[str, dict[str, str]] = field(default_factory=dict)


# ------------------------------------------------------------------------ the book


#: The largest file the reader reads: a notebook with its outputs, a glue file, _toc.yml.
_MAX_FILE_BYTES = 256 << 20


def _read_text(path: Path) -> str:
    """The text of ``path``, a regular file of at most 256 MiB, as UTF-8;
    else a :class:`ReaderError` naming it."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ReaderError(f"{path} is not a regular file")
        if info.st_size > _MAX_FILE_BYTES:
            raise ReaderError(f"{path} is larger than {_MAX_FILE_BYTES >> 20} MiB")
        with open(path, "rb") as f:
            data = f.read(_MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ReaderError(f"{path} cannot be read ({err.strerror or err})") from None
    if len(data) > _MAX_FILE_BYTES:
        raise ReaderError(f"{path} is larger than {_MAX_FILE_BYTES >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReaderError(f"{path} is not UTF-8 text") from None


def _read_json(path: Path) -> Any:
    """``path`` parsed as JSON (nested at most :data:`normlab._records.MAX_DEPTH` deep);
    a :class:`ReaderError` naming it when it is damaged."""
    try:
        return loads(_read_text(path), str(path), strict=False)
    except RecordError as err:
        raise ReaderError(f"{err} (rebuild the book: make book)") from None


def _notebook_cells(path: Path) -> list[dict[str, Any]]:
    """The cells of the notebook ``path``, each a dict with a ``cell_type`` and a text
    ``source``; a :class:`ReaderError` naming the file when it is not one."""
    notebook = _read_json(path)
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(_is_cell(c) for c in cells):
        raise ReaderError(f"{path} is not a notebook (its cells are damaged)")
    return cells


def _is_cell(cell: Any) -> bool:
    source = cell.get("source", "") if isinstance(cell, dict) else None
    return (
        isinstance(cell, dict)
        and isinstance(cell.get("cell_type"), str)
        and (
            isinstance(source, str)
            or (isinstance(source, list) and all(isinstance(x, str) for x in source))
        )
        and isinstance(cell.get("outputs", []), list)
    )


#: The largest ``_toc.yml`` read, and the deepest its brackets may nest (a table of contents
#: is a few hundred bytes, two or three levels deep).
_TOC_BYTES = 1 << 20
_TOC_DEPTH = 32


def _bracket_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets in ``text`` (quotes ignored: an upper
    bound), found without parsing."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _read_toc(path: Path) -> dict[str, Any]:
    """``_toc.yml``, checked: small, not nested deep, YAML without aliases (no expansion
    bomb), a mapping with a ``root``."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = _read_text(path)
    if len(text) > _TOC_BYTES or _bracket_depth(text) > _TOC_DEPTH:
        raise ReaderError(
            f"{path} is too large or nested too deep for a table of contents"
        )
    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=loader)):
            raise ReaderError(
                f"{path}: YAML aliases are not accepted in a table of contents"
            )
        toc = yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
    except (yaml.YAMLError, RecursionError) as err:
        why = "nested too deep" if isinstance(err, RecursionError) else "not valid YAML"
        raise ReaderError(
            f"{path} is {why}: {' '.join(str(err).split())[:200]}"
        ) from None
    if not isinstance(toc, dict) or not isinstance(toc.get("root"), str):
        raise ReaderError(f"{path} is not a jb-book table of contents (no root: file)")
    return toc


def _checked_entry(entry: Any, toc: str) -> str:
    """A ``file`` entry of the table of contents: a relative name inside the book."""
    if (
        not isinstance(entry, str)
        or not entry
        or entry.startswith("/")
        or ".." in Path(entry).parts
    ):
        raise ReaderError(
            f"{toc} lists file {entry!r}: a file must be a path relative to the book's "
            "root, inside it"
        )
    return entry


def _toc_files(toc: dict[str, Any]) -> list[tuple[str, bool]]:
    """Every ``file`` of a jb-book table of contents, root first, with whether it is in a
    numbered part."""
    found = [(toc["root"], False)]

    def walk(node: Any, numbered: bool, depth: int = 0) -> None:
        if depth > 16:
            raise ReaderError("_toc.yml nests its parts and chapters too deep")
        if isinstance(node, dict):
            numbered = bool(node.get("numbered", numbered))
            if "file" in node:
                found.append((node["file"], numbered))
            for key, value in node.items():
                if key != "file":
                    walk(value, numbered, depth + 1)
        elif isinstance(node, list):
            for item in node:
                walk(item, numbered, depth + 1)

    walk(toc.get("parts", toc.get("chapters", [])), False)
    return found


def _cells(path: Path) -> list[dict[str, Any]]:
    """The cells of a notebook, or a Markdown page as one Markdown cell."""
    if path.suffix != ".ipynb":
        return [{"cell_type": "markdown", "source": _read_text(path)}]
    return _notebook_cells(path)


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def read_book(root: str | Path) -> Book:
    """The chapters of ``root/_toc.yml`` and the index their cross-references need.

    Numbered files count from 1 across the numbered parts, as Sphinx numbers them; an
    exercise is "Exercise <chapter>.<k>", k counting from 1 in the chapter.
    """
    root = Path(root)
    toc = _read_toc(root / "_toc.yml")
    book = Book(root, [])
    number = 0
    for entry, numbered in _toc_files(toc):
        entry = _checked_entry(entry, str(root / "_toc.yml"))
        found = [root / f"{entry}{ext}" for ext in (".ipynb", ".md")]
        path = next((p for p in found if p.is_file()), None)
        if path is None:
            raise ReaderError(
                f"_toc.yml lists {entry!r}, which is neither .ipynb nor .md"
            )
        number += numbered
        cells = _cells(path)
        texts = [_source(c) for c in cells if c["cell_type"] == "markdown"]
        headings = [m["title"] for text in texts for m in _HEADING.finditer(text)]
        book.titles[entry] = _plain(headings[0]) if headings else entry
        chapter = None
        if path.suffix == ".ipynb":
            chapter = Chapter(path, number if numbered else None)
            book.chapters.append(chapter)
        _index(book, cells, chapter)
    bib = root / "book" / "references.bib"
    if bib.is_file():
        try:
            book.bibliography = read_bib(bib)
        except ReaderError as err:
            message = str(err)
            raise ReaderError(
                message if message.startswith(str(bib)) else f"{bib}: {message}"
            ) from None
    return book


def _index(book: Book, cells: list[dict[str, Any]], chapter: Chapter | None) -> None:
    """Add one page's exercises, figures and section targets to ``book.labels``, each
    numbered as :class:`_Converter` numbers it."""
    name = chapter.name if chapter else None
    exercises, figures = [], 0

    def label(key: str | None, shown: str) -> None:
        if key:
            book.labels[key] = (shown, name)

    for cell in cells:
        figure = _cell_figure(cell)
        if figure:
            figures += 1
            label(figure.get("name"), f"Fig. {_numbered(chapter, figures)}")
        if cell["cell_type"] != "markdown":
            continue
        text = _source(cell)
        for block in _walk(_blocks(text.splitlines())):
            if isinstance(block, _Directive) and block.name == "exercise":
                exercises.append(f"Exercise {_numbered(chapter, len(exercises) + 1)}")
                label(block.options.get("label"), exercises[-1])
            elif isinstance(block, _Directive) and _is_numbered_figure(block):
                figures += 1
                label(block.options.get("name"), f"Fig. {_numbered(chapter, figures)}")
        for match in _TARGET.finditer(text):
            heading = _HEADING.search(text, match.end())
            label(
                match["label"], _plain(heading["title"]) if heading else match["label"]
            )
    if name:
        book.exercises[name] = exercises


def _cell_figure(cell: dict[str, Any]) -> dict[str, Any]:
    """A code cell's figure options (``mystnb.figure``) when it has a caption, else {}."""
    if cell["cell_type"] != "code":
        return {}
    figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
    return figure if figure.get("caption") else {}


def _numbered(chapter: Chapter | None, k: int) -> str:
    return f"{chapter.number}.{k}" if chapter and chapter.number else str(k)


def _plain(text: str) -> str:
    """Heading text without Markdown emphasis or code marks."""
    return re.sub(r"[*_`]", "", text).strip()


def read_bib(path: str | Path) -> dict[str, dict[str, str]]:
    """The entries of a BibTeX file: key -> fields (lower-case names, braces removed, LaTeX
    accents as Unicode), with ``type`` the entry type."""
    text = _read_text(Path(path))
    entries = {}
    for match in _BIB_ENTRY.finditer(text):
        fields, i = {"type": match[1].lower()}, match.end()
        while found := _BIB_FIELD.match(text, i):
            value, i = _bib_value(text, found.end())
            fields[found[1].lower()] = _unlatex(value)
            i = _BIB_COMMA.match(text, i).end()
        entries[match[2]] = fields
    return entries


def _bib_value(text: str, i: int) -> tuple[str, int]:
    """A braced, quoted or bare BibTeX value starting at ``i``, and the index after it."""
    if text[i] in '{"':
        close, depth, j = ("}" if text[i] == "{" else '"'), 0, i
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            if (close == "}" and depth == 0) or (
                close == '"' and j > i and text[j] == '"' and depth == 0
            ):
                return text[i + 1 : j], j + 1
            j += 1
        raise ReaderError(f"unclosed BibTeX value at character {i}")
    bare = _BIB_BARE.match(text, i)
    return bare[0], bare.end()


_ACCENTS = {"'": "\u0301", "`": "\u0300", '"': "\u0308", "^": "\u0302", "~": "\u0303"}


def _unlatex(value: str) -> str:
    value = re.sub(
        r"\{?\\([`'\"^~])\{?(\w)\}?\}?",
        lambda m: unicodedata.normalize("NFC", m[2] + _ACCENTS[m[1]]),
        value,
    )
    value = (
        value.replace("\\_", "_")
        .replace("\\&", "&")
        .replace("``", '"')
        .replace("''", '"')
    )
    return re.sub(r"\s+", " ", value.replace("{", "").replace("}", "")).strip()


# ------------------------------------------------------------------------- glue


def read_glue(executed: str | Path) -> dict[str, dict[str, Any]]:
    """The values glued in one executed notebook: name -> MIME bundle (prefix removed).

    myst-nb writes them to ``<notebook>.glue.json`` beside the executed notebook and drops
    the hidden ones from its outputs, so both are read; the JSON wins. A missing file gives
    no values.
    """
    executed = Path(executed)
    found: dict[str, dict[str, Any]] = {}
    if os.path.lexists(executed):
        for cell in _notebook_cells(executed):
            for output in cell.get("outputs", []):
                meta = output.get("metadata") if isinstance(output, dict) else None
                scrap = meta.get("scrapbook") if isinstance(meta, dict) else None
                name = scrap.get("name") if isinstance(scrap, dict) else None
                if name is not None:
                    found[str(name)] = _unprefixed(output, executed)
    glue_json = executed.with_suffix(".glue.json")
    if os.path.lexists(glue_json):
        values = _read_json(glue_json)
        if not isinstance(values, dict):
            raise ReaderError(f"{glue_json} is not a mapping of glue names to outputs")
        for name, output in values.items():
            found[name] = _unprefixed(output, glue_json)
    return found


def _unprefixed(output: Any, where: Path) -> dict[str, Any]:
    """An output's MIME bundle, prefixes removed and text joined; a :class:`ReaderError`
    naming ``where`` when it is not one."""
    data = output.get("data", {}) if isinstance(output, dict) else None
    texts = (str, list)
    if not isinstance(data, dict) or not all(
        isinstance(v, texts)
        and (isinstance(v, str) or all(isinstance(x, str) for x in v))
        for v in data.values()
    ):
        raise ReaderError(
            f"{where} holds a glued output that is not a MIME bundle of text"
        )
    return {
        mime.removeprefix(GLUE_PREFIX): "".join(v) if isinstance(v, list) else v
        for mime, v in data.items()
    }


def format_plain_text(text: str, spec: str) -> str:
    """A glued ``text/plain`` formatted with ``spec`` as myst-nb's ``{glue:text}`` does:
    the repr read back as a Python literal where it is one, then converted to the type the
    spec's last character names."""
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if spec == "":
        return str(value)
    kind = spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, spec)


# ---------------------------------------------------------------- MyST Markdown


@dataclass
class _Directive:
    name: str
    arg: str
    options: dict[str, str]
    body: list[str]


def _is_numbered_figure(d: _Directive) -> bool:
    """Sphinx numbers a figure that has a caption."""
    return d.name == "figure" and any(line.strip() for line in d.body)


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(stripped) >= len(fence)
        and set(stripped) == {fence[0]}
        and len(line) - len(line.lstrip()) <= 3
    )


def _blocks(lines: list[str]) -> list[str | _Directive | list[str]]:
    """Lines as blocks: a text line (str), a directive, or a plain code fence (its lines)."""
    blocks: list[str | _Directive | list[str]] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        directive = _DIRECTIVE.match(match["info"].strip()) if match else None
        if match is None or (match["fence"][0] == ":" and directive is None):
            blocks.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _closes(lines[end], match["fence"]):
            end += 1
        if directive is None:
            blocks.append(lines[i : end + 1])
        else:
            body, options = lines[i + 1 : end], {}
            while body and (option := _OPTION.match(body[0])):
                options[option["key"]] = option["value"].strip()
                body = body[1:]
            blocks.append(
                _Directive(directive["name"], directive["arg"].strip(), options, body)
            )
        i = end + 1
    return blocks


def _walk(
    blocks: list[str | _Directive | list[str]],
) -> Iterator[str | _Directive | list[str]]:
    """Every block, directives' bodies included, in document order."""
    for block in blocks:
        yield block
        if isinstance(block, _Directive):
            yield from _walk(_blocks(block.body))


def _quote(text: str, title: str) -> str:
    """``text`` as a Markdown block quote under a bold ``title``. Maths and code spans are
    joined onto one line first: Jupyter cuts maths out before it parses Markdown, so a
    ``>`` inside a span would become part of the formula."""
    text = _SPAN.sub(lambda m: re.sub(r"\s*\n\s*", " ", m[0]), text.strip())
    lines = [f"**{title}**", "", *text.splitlines()]
    return "\n".join(f"> {line}".rstrip() for line in lines)


def _split_explicit(content: str) -> tuple[str | None, str]:
    """``title <target>`` -> (title, target); a bare target -> (None, target)."""
    match = _EXPLICIT.match(content.strip())
    if match and match["text"]:
        return match["text"], match["target"].strip()
    return None, content.strip()


class _Converter:
    """Converts one chapter's Markdown, cell by cell, remembering what it cited."""

    def __init__(
        self, chapter: Chapter, glued: dict[str, dict[str, Any]], book: Book
    ) -> None:
        self.chapter, self.glued, self.book = chapter, glued, book
        self.cited: list[str] = []
        self.exercises = 0
        self.figures = 0

    def fail(self, problem: str) -> ReaderError:
        return ReaderError(f"chapter {self.chapter.name}: {problem}")

    def markdown(self, text: str) -> str:
        """MyST Markdown as Markdown (gated solutions' ends marked, see :data:`_GATE`)."""
        out: list[str] = []
        lines: list[str] = []  # text lines not yet converted
        for block in _blocks(text.splitlines()):
            if isinstance(block, str):
                lines.append(block)
                continue
            out.append(self.roles(_TARGET.sub("", "\n".join(lines))))
            lines = []
            # a plain code fence is kept as it is
            out.append(
                "\n".join(block) if isinstance(block, list) else self.directive(block)
            )
        out.append(self.roles(_TARGET.sub("", "\n".join(lines))))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()

    # -------------------------------------------------------------- directives

    def directive(self, d: _Directive) -> str:
        body = self.markdown("\n".join(d.body))
        if d.name == "exercise":
            self.exercises += 1
            numbers = self.book.exercises.get(self.chapter.name, [])
            shown = (
                numbers[self.exercises - 1]
                if self.exercises <= len(numbers)
                else f"Exercise {_numbered(self.chapter, self.exercises)}"
            )
            title = f" ({self.roles(d.arg)})" if d.arg else ""
            return f"\n**{shown}{title}**\n\n{body}\n"
        if d.name == "solution":
            return f"\n{_details(self.solution_title(d.arg), body)}\n"
        if d.name in ("solution-start", "solution-end"):
            return f"\x00{d.name.removeprefix('solution-')} {d.arg}\x00"
        if d.name == "admonition" or d.name in ADMONITIONS:
            title = self.roles(d.arg) if d.arg else ADMONITIONS.get(d.name, "Note")
            if "dropdown" in d.options.get("class", "").split():
                return f"\n{_details(title, body)}\n"
            return f"\n{_quote(body, title)}\n"
        if d.name in ("figure", "image"):
            alt = d.options.get("alt") or _plain(
                body.splitlines()[0] if body else d.arg
            )
            image = f"![{alt}]({d.arg})"
            if not _is_numbered_figure(d):
                return f"\n{image}\n"
            self.figures += 1
            return (
                f"\n{image}\n\n*Fig. {_numbered(self.chapter, self.figures)}: {body}*\n"
            )
        if d.name == "math":
            maths = "\n".join(d.body).strip()
            return f"\n$$\n{maths}\n$$\n"
        if d.name in ("glue", "glue:any", "glue:md", "glue:text"):
            # the directive pastes a block where the role pastes inline: the same value
            return f"\n{self.role(d.name, d.arg.strip())}\n"
        if d.name.startswith("glue"):
            raise self.fail(
                f"the {{{d.name}}} directive is not converted; glue with a role"
            )
        if d.name == "bibliography":
            return ""
        title = f"**{self.roles(d.arg)}**\n\n" if d.arg else ""
        return f"\n{title}{body}\n"

    def solution_title(self, label: str) -> str:
        if label not in self.book.labels:
            raise self.fail(
                f"a solution names exercise {label!r}, which no chapter labels"
            )
        return f"Solution to {self.book.labels[label][0]}"

    # ------------------------------------------------------------------- roles

    def roles(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            if match["role"] is None:  # a code span
                return match[0]
            return self.role(match["role"], match["content"])

        return _ROLE.sub(one, text)

    def role(self, name: str, content: str) -> str:
        if name == "glue:text":
            key, spec = content.rsplit(":", 1) if ":" in content else (content, "s")
            plain = self.glue(key, "text/plain")
            try:
                # text, as the HTML book shows it: HTML in it is escaped, never live
                return html.escape(format_plain_text(plain, spec), quote=False)
            except (TypeError, ValueError) as err:
                raise self.fail(
                    f"glued {key!r} ({plain}) does not format as {spec!r}: {err}"
                ) from None
        if name == "glue:md":
            key = content.rsplit(":", 1)[0] if ":" in content else content
            return self.roles(self.glue(key, "text/markdown").strip())
        if name in ("glue", "glue:any"):
            bundle = self.glue(content, None)
            if "text/markdown" in bundle:
                return self.roles(bundle["text/markdown"].strip())
            for mime in ("text/plain", "text/html"):  # shown as text: HTML escaped
                if mime in bundle:
                    return html.escape(str(bundle[mime]).strip(), quote=False)
            raise self.fail(
                f"glued {content!r} has no text to paste (only {sorted(bundle)})"
            )
        if name in ("cite", "cite:p", "cite:ps", "cite:t", "cite:ts"):
            return self.cite(content, textual=name.startswith("cite:t"))
        if name in ("ref", "numref"):
            title, label = _split_explicit(content)
            if label not in self.book.labels:
                raise self.fail(
                    f"{{{name}}} names label {label!r}, which no page defines"
                )
            shown, where = self.book.labels[label]
            if title is not None:
                number = shown.rsplit(" ", 1)[-1]
                shown = title.replace("{number}", number).replace("%s", number)
            if where and where != self.chapter.name:
                return f"[{shown}]({where}.ipynb)"
            return shown
        if name == "doc":
            title, target = _split_explicit(content)
            here = self.chapter.path.parent.relative_to(self.book.root)
            docname = (
                target.lstrip("/")
                if target.startswith("/")
                else (here / target).as_posix()
            )
            docname = re.sub(r"\.(ipynb|md)$", "", docname)
            if docname not in self.book.titles:
                raise self.fail(f"{{doc}} names {target!r}, which is not in _toc.yml")
            shown = title or self.book.titles[docname]
            chapters = {
                c.path.relative_to(self.book.root).with_suffix("").as_posix()
                for c in self.book.chapters
            }
            return (
                f"[{shown}]({Path(docname).name}.ipynb)"
                if docname in chapters
                else shown
            )
        if name == "math":
            return f"${content}$"
        if name == "eq":
            return f"({content})"
        if name in ("sub", "sup", "kbd"):
            return f"<{name}>{content}</{name}>"
        if name in ("code", "literal", "file", "samp"):
            return f"`{content}`"
        title, target = _split_explicit(content)
        return title if title is not None else target

    def glue(self, key: str, mime: str | None) -> Any:
        if "::" in key:
            raise self.fail(f"glue from another document ({key!r}) is not converted")
        if key not in self.glued:
            raise self.fail(
                f"glue name {key!r} is not in the executed notebook "
                f"({EXECUTED}/.../{self.chapter.name}.ipynb or its .glue.json); "
                "build the book first (make book)"
            )
        bundle = self.glued[key]
        if mime is None:
            return bundle
        if mime not in bundle:
            raise self.fail(f"glued {key!r} has no {mime} (it has {sorted(bundle)})")
        return bundle[mime]

    def cite(self, content: str, textual: bool) -> str:
        shown = []
        for key in (k.strip() for k in content.split(",")):
            entry = self.book.bibliography.get(key)
            if entry is None:
                raise self.fail(
                    f"cites {key!r}, which book/references.bib does not hold"
                )
            if key not in self.cited:
                self.cited.append(key)
            authors, year = (
                _authors_short(entry.get("author", key)),
                entry.get("year", "n.d."),
            )
            shown.append(f"{authors} ({year})" if textual else f"{authors}, {year}")
        return ", ".join(shown) if textual else f"({'; '.join(shown)})"

    def references(self) -> str:
        """The works this chapter cited, as a Markdown list (empty when none)."""
        if not self.cited:
            return ""
        lines = ["## References", ""]
        for key in sorted(
            self.cited,
            key=lambda k: _authors_short(self.book.bibliography[k].get("author", k)),
        ):
            lines.append(f"- {_reference(self.book.bibliography[key])}")
        return "\n".join(lines)


def _details(summary: str, body: str) -> str:
    """A folded block; the blank lines let Jupyter parse the Markdown inside it."""
    return f"<details>\n<summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _last_names(authors: str) -> list[str]:
    names = []
    for person in re.split(r"\s+and\s+", authors):
        last, comma, first = person.partition(",")
        names.append(last.strip() if comma else person.split()[-1])
    return names


def _authors_short(authors: str) -> str:
    names = _last_names(authors)
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    return f"{names[0]} et al."


def _reference(entry: dict[str, str]) -> str:
    people = []
    for person in re.split(r"\s+and\s+", entry.get("author", "")):
        last, comma, first = person.partition(",")
        people.append(f"{first.strip()} {last.strip()}" if comma else person.strip())
    venue = entry.get("booktitle") or entry.get("journal") or entry.get("howpublished")
    parts = [
        f"{', '.join(people)} ({entry.get('year', 'n.d.')}). *{entry.get('title', '')}*."
    ]
    if venue:
        parts.append(f"{venue}.")
    if "url" in entry:
        parts.append(f"<{entry['url']}>")
    return " ".join(parts)


# ---------------------------------------------------------------------- notebooks


def _is_install_cell(cell: dict[str, Any]) -> bool:
    return cell["cell_type"] == "code" and "google.colab" in _source(cell)


def convert(
    notebook: dict[str, Any],
    chapter: Chapter,
    glued: dict[str, dict[str, Any]],
    book: Book,
) -> dict[str, Any]:
    """One chapter's notebook as a reader notebook: Markdown cells in plain Markdown and
    HTML, glued values pasted from ``glued`` (:func:`read_glue`), code cells without
    outputs, the cells the book removes dropped except the Colab install cell (first).

    Raises:
        ReaderError: naming the chapter and what it lacks: a glue name that ``glued`` does
            not hold, an exercise label or citation key that the book does not define.
    """
    converter = _Converter(chapter, glued, book)
    cells: list[dict[str, Any]] = []
    gate: list[Any] = []  # [summary, chunks shown so far] of the open gated solution

    def markdown(text: str) -> None:
        if text.strip():
            cells.append(
                {"cell_type": "markdown", "metadata": {}, "source": text.strip()}
            )

    for cell in notebook["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code":
            install = _is_install_cell(cell)
            if "remove-cell" in tags and not install:
                continue
            cells.append(_code_cell(cell, tags, gate[0] if gate else None, install))
            figure = _cell_figure(cell)
            if figure:
                converter.figures += 1
                number = _numbered(chapter, converter.figures)
                markdown(f"*Fig. {number}: {converter.roles(figure['caption'])}*")
            continue
        if cell["cell_type"] != "markdown":
            continue
        pieces: list[str] = []
        text = converter.markdown(_source(cell))
        position = 0
        for match in _GATE.finditer(text):
            pieces.append(_gated(text[position : match.start()], gate))
            if match["what"] == "start":
                gate[:] = [converter.solution_title(match["label"].strip()), 0]
            else:
                gate.clear()
            position = match.end()
        pieces.append(_gated(text[position:], gate))
        markdown("\n\n".join(p for p in pieces if p))
    if gate:
        raise converter.fail(f"a gated solution ({gate[0]}) has no solution-end")
    markdown(converter.references())
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i}"
    metadata = {
        k: v
        for k, v in notebook.get("metadata", {}).items()
        if k in ("kernelspec", "language_info")
    }
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def _gated(text: str, gate: list[Any]) -> str:
    """``text`` folded when a gated solution is open (its later parts say "continued")."""
    text = text.strip()
    if not text or not gate:
        return text
    summary = gate[0] if gate[1] == 0 else f"{gate[0]} (continued)"
    gate[1] += 1
    return _details(summary, text)


def _code_cell(
    cell: dict[str, Any], tags: list[str], solution: str | None, install: bool
) -> dict[str, Any]:
    """A code cell without outputs; the book's hiding tags as Jupyter's cell metadata, and a
    gated solution's code collapsed under a comment naming it."""
    source = _source(cell)
    hidden: dict[str, bool] = {}
    for tag in tags:
        hidden.update(HIDDEN.get(tag, {}))
    if solution is not None:
        source = f"# {solution}\n{source}"
        hidden = {"source_hidden": True, "outputs_hidden": True}
    metadata: dict[str, Any] = {"jupyter": hidden} if hidden and not install else {}
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": metadata,
        "outputs": [],
        "source": source,
    }


def write_notebooks(root: str | Path, build: str | Path) -> list[Path]:
    """Write the reader notebook of every chapter of ``root``'s book, from the executed
    notebooks under ``build`` (``build/jupyter_execute``), into ``build/notebooks`` and a copy
    into ``build/html/notebooks``; returns the written paths under ``build/notebooks``.

    Raises:
        ReaderError: a chapter cannot be converted (see :func:`convert`).
    """
    root, build = Path(root), Path(build)
    book = read_book(root)
    out, published = build / NOTEBOOKS, build / "html" / NOTEBOOKS
    written = []
    for chapter in book.chapters:
        relative = chapter.path.relative_to(root)
        glued = read_glue(build / EXECUTED / relative)
        source = {"cells": _notebook_cells(chapter.path)}
        reader = convert({**_read_json(chapter.path), **source}, chapter, glued, book)
        text = json.dumps(reader, indent=1, ensure_ascii=False) + "\n"
        for folder in (out, published):
            write_text_atomic(folder / f"{chapter.name}.ipynb", text)
        written.append(out / f"{chapter.name}.ipynb")
        for image in _local_images(reader):
            source = _inside(chapter, image, root / "book")
            if source.is_file():
                for folder in (out, published):
                    (folder / image).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, folder / image)
    return written


def _inside(chapter: Chapter, image: str, book: Path) -> Path:
    """The file of a chapter's ``image`` (a relative path), which must lie inside ``book``
    (links resolved): the reader notebooks and their images are published, so a path
    with ``..`` that leaves it is a :class:`ReaderError`."""
    source = chapter.path.parent / image
    where = Path(os.path.realpath(source))
    if ".." in Path(image).parts or not where.is_relative_to(os.path.realpath(book)):
        raise ReaderError(
            f"chapter {chapter.name}: the image {image!r} is outside {book}; a chapter's "
            "images must be files inside book/ (they are published with the HTML)"
        )
    return source


def _local_images(notebook: dict[str, Any]) -> set[str]:
    """Relative image paths that the notebook's Markdown shows."""
    found = set()
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for path in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", cell["source"]):
                if "://" not in path and not path.startswith(("/", "data:")):
                    found.add(path)
    return found


# ------------------------------------------------------------------------ Colab


def colab_link(colab_url: str, repository_url: str, branch: str, chapter: str) -> str:
    """The Colab link of one chapter's reader notebook (``chapter``: its name,
    ``02_affine_divergence``), published on ``branch`` of the GitHub repository."""
    match = re.fullmatch(
        r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", repository_url
    )
    if match is None:
        raise ValueError(
            f"repository_url must be a GitHub repository URL, got {repository_url!r}"
        )
    return f"{colab_url.rstrip('/')}/github/{match[1]}/blob/{branch}/{NOTEBOOKS}/{chapter}.ipynb"


def _colab_button(
    app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Point the page's Colab launch button (sphinx-book-theme's) at its reader notebook."""
    options = app.config.html_theme_options
    launch = options.get("launch_buttons", {})
    branch = launch.get("pages_branch")
    if not branch or not launch.get("colab_url"):
        return
    url = colab_link(
        launch["colab_url"],
        options.get("repository_url", ""),
        branch,
        Path(pagename).name,
    )
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            for button in group.get("buttons", []):
                if button.get("text") == "Colab":
                    button["url"] = url


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point: after sphinx-book-theme adds the launch buttons (priority 501),
    the Colab one is pointed at the reader notebook."""
    app.connect("html-page-context", _colab_button, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m normlab_book.reader [BUILD] [--root ROOT]``: write the reader notebooks."""
    parser = argparse.ArgumentParser(
        prog="python -m normlab_book.reader", description=main.__doc__
    )
    parser.add_argument(
        "build",
        nargs="?",
        default="_build",
        help="the book's build folder (default: _build)",
    )
    parser.add_argument(
        "--root", default=".", help="the book's root, with _toc.yml (default: .)"
    )
    args = parser.parse_args(argv)
    try:
        written = write_notebooks(args.root, args.build)
    except ReaderError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a folder that cannot be written
        print(
            f"error: {err.strerror or err}: {err.filename or args.build}",
            file=sys.stderr,
        )
        return 1
    build = Path(args.build)
    print(
        f"wrote {len(written)} reader notebooks to {build / NOTEBOOKS} and {build / 'html' / NOTEBOOKS}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
