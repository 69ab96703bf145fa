"""Open every page of the built book in headless Chromium and check what a reader would see.

Run after the structure build (``make test-structure`` writes ``_build/structure``)::

    python tests/browser_check.py _build/structure

Per page it asserts:

- no request for a local (``file://``) resource fails, and nothing is requested from the network
  (such a request is refused and reported: the book must read offline);
- every internal link resolves to a file, and its ``#fragment`` to an id in that file;
- every image has loaded;
- every equation is typeset by MathJax, with no raw ``$$``, ``\\(`` or ``\\[`` left in the text;
- a notebook page carries the Colab launch link to its notebook on the repository's branch,
  both read from ``_config.yml``;
- a page with interactive figures (:mod:`normlab.interactive`) loads the shared Vega bundle
  once and inlines at most ``MAX_DATA_BYTES`` of data; every control of every chart, moved in
  turn, changes the chart's SVG; and the pages of ``INTERACTIVE`` have at least that many such
  controls (the structure build executes chapters 10 and 11 so that their pages have them);
- at 1280 px, no table and no output block is wider than its container (nor scrolls inside
  it), and no image is shown at less than ``MIN_SHOWN`` (0.8) of its natural width
  (:data:`LAYOUT_JS`);
- at 1280 px and at phone width (390 px), no word of a table cell is broken across lines
  (:data:`WORDS_JS`: a Range per word, whose boxes must lie on one line);
- in chapters 1-15 (``CAPTIONED``), every figure (an image in a cell's output) has its
  caption right under it: the first visible block after its cell is a paragraph beginning
  "Figure", with no table or text of its cell after its last figure (:data:`CAPTIONS_JS`);
- every verdict cell (a table column headed "verdict") is in view without a sideways scroll,
  at 1280 px on every page and at phone width on the scorecard (:data:`VERDICTS_JS`).

It writes one screenshot per part of the table of contents (its first page) to
``screenshots/`` beside the build (``_build/screenshots/``), and one of a chapter at phone width. The link and Colab checks read
the HTML and run without a browser; the rest needs Chromium (Debian's ``chromium`` package).
Where Chromium is absent the script says so loudly and exits 0, unless ``CI`` is set.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urlparse

import yaml
from normlab.interactive import BUNDLE, MARKER, MAX_DATA_BYTES
from normlab_book.reader import colab_link

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
COLAB = "https://colab.research.google.com/github"
# sphinx-thebe 0.3 declares this constant in two scripts that Jupyter Book 1 both loads; the
# launch buttons work regardless.
KNOWN_SCRIPT_ERROR = "Identifier 'THEBE_JS_URL' has already been declared"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
#: The smallest share of its natural width an image may be shown at (at 1280 px).
MIN_SHOWN = 0.8
#: Chapters whose figures need a caption (by the number their file name starts with).
CAPTIONED = range(1, 16)
#: The page whose verdicts are also checked at phone width.
SCORECARD = "book/16_scorecard"
#: Pages that must carry interactive figures, with the fewest controls that change them.
INTERACTIVE = {"book/10_gate": 4, "book/11_bottleneck": 2}
SPEC = re.compile(
    rf'<script type="application/json" id="({MARKER}-[0-9a-f]+)-spec">(.*?)</script>',
    re.S,
)


@dataclass
class Page:
    """One built HTML page and the source it came from."""

    html: Path
    source: Path | None
    problems: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)


def repository(config: dict) -> tuple[str, str]:
    """``(owner/name, branch)`` of the repository that ``_config.yml`` names."""
    url = config["repository"]["url"].rstrip("/")
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(?:\.git)?", url)
    if match is None:
        raise ValueError(
            f"_config.yml repository.url must be a GitHub URL, got {url!r}"
        )
    return match.group(1), config["repository"].get("branch", "main")


def colab_url(config: dict, notebook: str) -> str:
    """The Colab link of one chapter (``notebook`` relative to the repository root): its
    reader notebook, published with the HTML on ``launch_buttons.pages_branch``."""
    repository(config)  # a GitHub repository, or a ValueError that names the setting
    launch = config["launch_buttons"]
    return colab_link(
        launch["colab_url"],
        config["repository"]["url"],
        launch["pages_branch"],
        Path(notebook).stem,
    )


def toc_entries(toc: dict) -> list[tuple[str, list[str]]]:
    """``(caption, files)`` per part of a jb-book table of contents, the root first; a part
    without a caption belongs to the one above it."""
    parts = [("Preface", [toc["root"]])]
    for part in toc.get("parts", []):
        files = []

        def walk(node: object, files: list[str] = files) -> None:
            if isinstance(node, dict):
                if "file" in node:
                    files.append(node["file"])
                for value in node.values():
                    walk(value, files)
            elif isinstance(node, list):
                for item in node:
                    walk(item, files)

        walk(part.get("chapters", []))
        if "caption" in part or len(parts) == 1:
            parts.append((part.get("caption", "part"), files))
        else:  # an uncaptioned part (numbered chapters) continues the part above it
            parts[-1][1].extend(files)
    return parts


def pages(build: Path, toc: dict) -> list[Page]:
    """Every page of the table of contents, with its source file when it exists."""
    found = []
    for _, files in toc_entries(toc):
        for entry in files:
            sources = [ROOT / f"{entry}{ext}" for ext in (".ipynb", ".md")]
            source = next((s for s in sources if s.is_file()), None)
            found.append(Page(build / f"{entry}.html", source))
    return found


def ids_in(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        cache[path] = set(
            re.findall(r'\bid="([^"]+)"', path.read_text(errors="replace"))
        )
    return cache[path]


def check_html(
    page: Page, build: Path, config: dict, cache: dict[Path, set[str]]
) -> None:
    """The checks that need no browser: internal links, image files, the Colab link."""
    if not page.html.is_file():
        page.problems.append(f"not built: {page.html}")
        return
    text = page.html.read_text(errors="replace")
    for attr, target in re.findall(r'\b(href|src)="([^"]*)"', text):
        target = html.unescape(target)
        if urlparse(target).scheme or target.startswith(
            ("//", "mailto:", "javascript:", "data:")
        ):
            continue
        url, fragment = urldefrag(target)
        url = urlparse(url).path  # drop a cache-busting ?v=...
        path = (page.html.parent / unquote(url)).resolve() if url else page.html
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            page.problems.append(f"{attr} to a missing file: {target}")
        elif (
            fragment
            and path.suffix == ".html"
            and unquote(fragment) not in ids_in(path, cache)
        ):
            page.problems.append(f"link to a missing anchor: {target}")
    check_charts_html(page, text)
    entry = page.html.relative_to(build).with_suffix("").as_posix()
    if entry in INTERACTIVE and not page.charts:
        page.problems.append("no interactive figure (was its notebook executed?)")
    if page.source is not None and page.source.suffix == ".ipynb":
        expected = colab_url(config, page.source.relative_to(ROOT).as_posix())
        links = set(re.findall(rf'href="({re.escape(COLAB)}[^"]*)"', text))
        if expected not in {html.unescape(link) for link in links}:
            page.problems.append(
                f"no Colab link to {expected} (found {sorted(links) or 'none'})"
            )


def check_charts_html(page: Page, text: str) -> None:
    """The bundle is loaded once on a page with charts (never on one without), and the
    page's inlined data are at most ``MAX_DATA_BYTES``."""
    specs = [json.loads(spec) for _, spec in SPEC.findall(text)]
    page.charts = [chart_id for chart_id, _ in SPEC.findall(text)]
    loads = len(re.findall(rf'<script[^>]*\bsrc="[^"]*{re.escape(BUNDLE)}[^"]*"', text))
    if specs and loads != 1:
        page.problems.append(f"{BUNDLE} loaded {loads} times, expected once")
    if not specs and loads:
        page.problems.append(f"{BUNDLE} loaded on a page without interactive figures")
    data = sum(
        len(
            json.dumps(
                [s.get("datasets", {}), s.get("data", {})], separators=(",", ":")
            )
        )
        for s in specs
    )
    if data > MAX_DATA_BYTES:
        page.problems.append(
            f"interactive figures inline {data} bytes of data, expected at most {MAX_DATA_BYTES}"
        )


# Run in the page: move one control of a chart (its index-th .vega-bind) to another value;
# returns the control's name. A radio group picks its first unchecked option, a checkbox
# toggles, a range goes to its far end, a select to its next option.
MOVE_JS = r"""([id, index]) => {
  const bind = document.getElementById(id).querySelectorAll(".vega-bind")[index];
  const name = (bind.querySelector(".vega-bind-name") || bind).textContent.trim();
  const fire = (el) => ["input", "change"].forEach(t => el.dispatchEvent(new Event(t, {bubbles: true})));
  const radio = bind.querySelector("input[type=radio]:not(:checked)");
  const box = bind.querySelector("input[type=checkbox]");
  const range = bind.querySelector("input[type=range]");
  const select = bind.querySelector("select");
  if (radio) radio.click();
  else if (box) box.click();
  else if (range) {
    range.value = Number(range.value) >= Number(range.max) ? range.min : range.max;
    fire(range);
  } else if (select) {
    select.selectedIndex = (select.selectedIndex + 1) % select.options.length;
    fire(select);
  } else return null;
  return name;
}"""

SVG_JS = "(id) => { const s = document.querySelector('#' + id + ' svg'); return s ? s.outerHTML : null; }"
# How many data marks (lines, points, bars, bands) the chart draws: a move that selects data
# the chart does not have would change the SVG too, by emptying it.
MARKS_JS = """(id) => [...document.querySelectorAll('#' + id + ' svg .mark-line path, #' + id +
  ' svg .mark-symbol path, #' + id + ' svg .mark-rect path, #' + id + ' svg .mark-area path')]
  .filter(p => (p.getAttribute('d') || '').length > 2).length"""


def drive_charts(tab: Any, page: Page) -> int:
    """Move every control of every chart on the page, in turn; each must change its chart's
    SVG. Returns how many did."""
    moved = 0
    for chart_id in page.charts:
        try:
            tab.wait_for_function(
                "(id) => document.querySelector('#' + id + ' svg')",
                arg=chart_id,
                timeout=30_000,
            )
        except Exception as error:  # the chart never drew: say so, check the rest
            page.problems.append(f"interactive figure {chart_id} did not draw: {error}")
            continue
        controls = tab.evaluate(
            "(id) => document.getElementById(id).querySelectorAll('.vega-bind').length",
            chart_id,
        )
        for index in range(controls):
            before = tab.evaluate(SVG_JS, chart_id)
            name = tab.evaluate(MOVE_JS, [chart_id, index])
            try:
                tab.wait_for_function(
                    f"([id, before]) => ({SVG_JS})(id) !== before",
                    arg=[chart_id, before],
                    timeout=5_000,
                )
                moved += 1
                if tab.evaluate(MARKS_JS, chart_id) == 0:
                    page.problems.append(
                        f"control {name!r} of {chart_id} left the chart without data"
                    )
            except Exception:
                page.problems.append(
                    f"control {name!r} of {chart_id} did not change the chart"
                )
    return moved


# Run in the page: raw TeX left in the text outside code, scripts and typeset maths.
RAW_TEX_JS = r"""() => {
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "MJX-CONTAINER", "TEXTAREA"]);
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      for (let el = node.parentElement; el; el = el.parentElement) {
        if (skip.has(el.tagName.toUpperCase())) return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }
  });
  const raw = /\$\$|\\\(|\\\[|\$[^$\s][^$]*\\[A-Za-z]+[^$]*\$/;
  while (walker.nextNode()) {
    const t = walker.currentNode.textContent;
    if (raw.test(t)) found.push(t.trim().slice(0, 80));
  }
  return found;
}"""

MATH_JS = r"""() => {
  const maths = [...document.querySelectorAll(".math, span.math, div.math")];
  const bare = maths.filter(m => !m.querySelector("mjx-container") && !m.closest("mjx-container"));
  const errors = document.querySelectorAll("mjx-merror, [data-mjx-error]").length;
  return {count: maths.length, bare: bare.map(m => m.textContent.trim().slice(0, 60)), errors};
}"""

IMAGES_JS = r"""() => [...document.images]
  .filter(img => !(img.complete && img.naturalWidth > 0))
  .map(img => img.getAttribute("src"))"""


# Run in the page: what is wider than its container at this width. A table's container is the
# article's text column; an output block (a cell's output: text, a table, HTML) must fit it
# and must not scroll inside it. An image shown at less than MIN_SHOWN of its natural width
# is too small to read: every figure is drawn for the column. Code listings that scroll are
# counted too (ruff keeps the package's and the chapters' code to 88 columns).
LAYOUT_JS = r"""(MIN_SHOWN) => {
  const column = document.querySelector("article.bd-article, article, main") || document.body;
  const style = getComputedStyle(column);
  const box = column.getBoundingClientRect();
  const right = box.right - parseFloat(style.paddingRight || 0) + 1;
  const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const name = (el) => (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 50);
  const scrolls = (el) => el.scrollWidth > el.clientWidth + 1;
  const wide = (el) => el.getBoundingClientRect().right > right;
  const tables = [...column.querySelectorAll("table")].filter(shown)
    .filter(t => wide(t) || (t.parentElement && scrolls(t.parentElement) && !t.closest("pre")))
    .map(t => `${Math.round(t.getBoundingClientRect().width)} px: ${name(t)}`);
  const outputs = [...column.querySelectorAll("div.cell_output > div.output, div.cell_output > div")]
    .filter(shown)
    .filter(o => wide(o) || scrolls(o) || [...o.querySelectorAll("pre")].some(scrolls))
    .map(o => `${Math.round(Math.max(o.scrollWidth, ...[...o.querySelectorAll("pre")]
      .map(p => p.scrollWidth)))} px: ${name(o)}`);
  const images = [...column.querySelectorAll("img")].filter(shown)
    .filter(i => i.naturalWidth > 0 && i.getBoundingClientRect().width < i.naturalWidth * MIN_SHOWN - 0.5)
    .map(i => `${Math.round(i.getBoundingClientRect().width)} of ${i.naturalWidth} px: ${i.getAttribute("src").slice(-40)}`);
  const listings = [...column.querySelectorAll("div.cell_input pre, div.normlab-source pre")]
    .filter(shown).filter(scrolls).length;
  return {tables: [...new Set(tables)], outputs: [...new Set(outputs)], images, listings};
}"""

# Run in the page: every cell of a table column headed "verdict", and whether a reader sees
# all of it without scrolling sideways: inside the window, not clipped by a scrolling or
# hidden-overflow ancestor, its text not cut, and the page itself not scrolling sideways.
VERDICTS_JS = r"""() => {
  const width = document.documentElement.clientWidth;
  const pageScrolls = document.documentElement.scrollWidth > width + 1;
  const cells = [];
  for (const table of document.querySelectorAll("table")) {
    const heads = [...table.querySelectorAll("thead th, thead td")];
    const col = heads.findIndex(h => h.textContent.trim().toLowerCase() === "verdict");
    if (col < 0) continue;
    for (const row of table.querySelectorAll("tbody tr")) {
      const cell = row.children[col];
      if (cell) cells.push(cell);
    }
  }
  const clipped = (cell) => {
    const r = cell.getBoundingClientRect();
    if (r.left < -1 || r.right > width + 1) return true;
    for (let el = cell.parentElement; el; el = el.parentElement) {
      const o = getComputedStyle(el).overflowX;
      if (o !== "visible") {
        const b = el.getBoundingClientRect();
        if (r.left < b.left - 1 || r.right > b.right + 1) return true;
      }
    }
    return cell.scrollWidth > cell.clientWidth + 1;
  };
  const out = cells.filter(c => pageScrolls || clipped(c)).map(c => c.textContent.trim().slice(0, 40));
  return {total: cells.length, out};
}"""


# Run in the page: every word of a table cell that the layout broke across lines. A word is a
# run of non-space characters of one text node, split after a hyphen or a slash that follows
# a letter or digit (a legitimate break, as in "CIFAR-/10"); it is broken when its Range's
# boxes lie on more than one line. Code and links (a path, a URL, an identifier: no space to
# break at) may wrap anywhere and are not read.
WORDS_JS = r"""() => {
  const column = document.querySelector("article.bd-article, article, main") || document.body;
  const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const broken = [];
  for (const cell of column.querySelectorAll("td, th")) {
    if (!shown(cell)) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => node.parentElement.closest("code, a, kbd, samp")
        ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
    });
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const text = node.textContent;
      for (const m of text.matchAll(/[^\s\u200b]+/g)) {
        let start = m.index;
        for (const part of m[0].split(/(?<=[A-Za-z0-9][-/\u2010\u2013])(?=[A-Za-z0-9])/)) {
          const range = document.createRange();
          range.setStart(node, start);
          range.setEnd(node, start + part.length);
          start += part.length;
          const lines = new Set([...range.getClientRects()]
            .filter(r => r.width > 0).map(r => Math.round(r.bottom)));
          if (lines.size > 1) broken.push(part.slice(0, 40));
        }
      }
    }
  }
  return [...new Set(broken)];
}"""

# Run in the page: each figure (an image in a cell's output) and the caption under it. The
# caption is the first visible block after the figure's cell (cells that show nothing, such
# as a check whose input is removed, are skipped): a paragraph whose text begins with
# "Figure" (the chapter's Markdown cell "**Figure.** ..." right under the figure's cell).
# Nothing but figures lies between: no table or text is printed after a cell's last figure
# (the figures of one cell, such as a panel per optimiser, share one caption).
CAPTIONS_JS = r"""() => {
  const column = document.querySelector("article.bd-article, article, main") || document.body;
  const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const missing = [];
  const cells = new Set([...column.querySelectorAll("div.cell_output img")].filter(shown)
    .map(img => img.closest("div.cell")).filter(cell => cell));
  for (const cell of cells) {
    const images = [...cell.querySelectorAll("div.cell_output img")].filter(shown);
    const last = images[images.length - 1];
    const name = (last.getAttribute("src") || "").slice(-40);
    const after = [...cell.querySelectorAll("div.cell_output table, div.cell_output pre")]
      .filter(el => shown(el) &&
              (last.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING));
    if (after.length) { missing.push(`${name}: output shown after the figure, above its caption`); continue; }
    let next = cell.nextElementSibling;
    while (next && !(shown(next) && next.textContent.trim())) next = next.nextElementSibling;
    const text = next ? next.textContent.trim() : "";
    if (!/^Figure\b/.test(text)) missing.push(`${name}: no caption under it (next: ${JSON.stringify(text.slice(0, 40))})`);
  }
  return missing;
}"""


def layout_problems(tab: Any) -> list[str]:
    """What is too wide or shown too small on the page loaded in ``tab`` (at 1280 px)."""
    found = tab.evaluate(LAYOUT_JS, MIN_SHOWN)
    return (
        [f"table wider than its container: {t}" for t in found["tables"]]
        + [f"output block wider than its container: {o}" for o in found["outputs"]]
        + [
            f"image shown at less than {MIN_SHOWN:.0%} of its width: {i}"
            for i in found["images"]
        ]
    )


def word_problems(tab: Any, where: str) -> list[str]:
    """Each word of a table cell that the page loaded in ``tab`` breaks across lines."""
    return [
        f"word broken in a table cell {where}: {w!r}" for w in tab.evaluate(WORDS_JS)
    ]


def caption_problems(tab: Any) -> list[str]:
    """Each figure of the page loaded in ``tab`` without its caption right under it."""
    return [f"figure without a caption: {c}" for c in tab.evaluate(CAPTIONS_JS)]


def captioned(entry: str) -> bool:
    """Whether the page ``entry`` (``book/10_gate``) is a chapter whose figures need
    captions (:data:`CAPTIONED`)."""
    number = re.match(r"book/(\d+)_", entry)
    return number is not None and int(number.group(1)) in CAPTIONED


def verdict_problems(tab: Any, where: str) -> tuple[int, list[str]]:
    """``(verdict cells, problems)``: each verdict cell out of view ``where`` is a problem."""
    found = tab.evaluate(VERDICTS_JS)
    return found["total"], [f"verdict out of view {where}: {v!r}" for v in found["out"]]


def refuse_and_report(page: Page) -> Callable[[Any], None]:
    """A route handler (one argument: Playwright passes a second to two-argument callables)."""

    def handler(route: Any) -> None:
        page.problems.append(f"network request: {route.request.url}")
        route.abort()

    return handler


def check_in_browser(
    pages_: list[Page], toc: dict, build: Path, shots: Path, chromium: str
) -> dict[str, int]:
    """Load each page in headless Chromium; offline: every non-file request is refused.

    Returns the tallies of the layout checks over all pages (tables, output blocks, images,
    verdict cells at each width, and listings that scroll)."""
    from playwright.sync_api import sync_playwright

    first_of_part = {files[0]: caption for caption, files in toc_entries(toc) if files}
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context(viewport=DESKTOP)
        tally = dict.fromkeys(
            (
                "tables",
                "outputs",
                "images",
                "listings",
                "verdicts",
                "out_1280",
                "words_1280",
                "words_phone",
                "captions",
            ),
            0,
        )
        for page in pages_:
            if not page.html.is_file():
                continue
            tab = context.new_page()
            # Offline: a request that leaves the machine is refused and reported.
            tab.route(re.compile(r"^(?!file:).*"), refuse_and_report(page))
            bundles: list[str] = []
            tab.on(
                "request",
                lambda r, bundles=bundles: (
                    bundles.append(r.url) if r.url.endswith(BUNDLE) else None
                ),
            )
            failed: list[str] = []
            tab.on(
                "requestfailed",
                lambda r, failed=failed: (
                    failed.append(r.url) if r.url.startswith("file:") else None
                ),
            )
            tab.on(
                "pageerror",
                lambda e, p=page: (
                    None
                    if KNOWN_SCRIPT_ERROR in str(e)
                    else p.problems.append(f"script error: {e}")
                ),
            )
            tab.goto(
                page.html.as_uri(), wait_until="load", timeout=120_000
            )  # a loaded 2-core machine
            if tab.evaluate("() => document.querySelector('.math') !== null"):
                try:
                    tab.wait_for_function(
                        "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                        timeout=15_000,
                    )
                    tab.evaluate("() => MathJax.startup.promise")
                except (
                    Exception
                ) as error:  # MathJax never started: say so, keep checking
                    page.problems.append(f"MathJax did not start: {error}")
            maths = tab.evaluate(MATH_JS)
            page.problems += [f"equation not typeset: {m!r}" for m in maths["bare"]]
            if maths["errors"]:
                page.problems.append(f"{maths['errors']} MathJax errors")
            page.problems += [
                f"raw TeX in the text: {t!r}" for t in tab.evaluate(RAW_TEX_JS)
            ]
            page.problems += [
                f"image did not load: {src}" for src in tab.evaluate(IMAGES_JS)
            ]
            layout = tab.evaluate(LAYOUT_JS, MIN_SHOWN)
            for key in ("tables", "outputs", "images"):
                tally[key] += len(layout[key])
            tally["listings"] += layout["listings"]
            page.problems += layout_problems(tab)
            words = word_problems(tab, f"at {DESKTOP['width']} px")
            tally["words_1280"] += len(words)
            page.problems += words
            entry = page.html.relative_to(build).with_suffix("").as_posix()
            if captioned(entry):
                captions = caption_problems(tab)
                tally["captions"] += len(captions)
                page.problems += captions
            total, out = verdict_problems(tab, "at 1280 px")
            tally["verdicts"] += total
            tally["out_1280"] += len(out)
            page.problems += out
            if page.charts:
                moved = drive_charts(tab, page)
                # Counted in the DOM: a page served from Chromium's memory cache loads the
                # bundle without a request event, so the request count may be 0, never 2.
                scripts = tab.evaluate(
                    # an incremental build adds Sphinx's ?v=<checksum> to the src
                    "(b) => [...document.scripts]"
                    ".filter(s => s.src.split('?')[0].endsWith(b)).length",
                    BUNDLE,
                )
                if scripts != 1 or len(bundles) > 1:
                    page.problems.append(
                        f"{BUNDLE} included by {scripts} script tags and requested "
                        f"{len(bundles)} times, expected once"
                    )
                for i, chart_id in enumerate(page.charts, 1):
                    name = f"interactive-{Path(entry).name}-{i}.png"
                    tab.locator(f"#{chart_id}").screenshot(path=str(shots / name))
                print(f"{entry}: {moved} controls moved, each changed its chart")
            else:
                moved = 0
            if moved < INTERACTIVE.get(entry, 0):
                page.problems.append(
                    f"{moved} controls changed an interactive figure, expected at least {INTERACTIVE[entry]}"
                )
            page.problems += [f"failed local request: {url}" for url in failed]
            if entry in first_of_part:
                name = re.sub(r"[^a-z0-9]+", "-", first_of_part[entry].lower()).strip(
                    "-"
                )
                tab.screenshot(path=str(shots / f"{name}.png"), full_page=False)
            tab.close()
        phone = browser.new_context(
            viewport=PHONE, device_scale_factor=2, is_mobile=True
        )
        phone.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
        # Every page at phone width: no word of a table cell broken across lines.
        for page in pages_:
            if not page.html.is_file():
                continue
            tab = phone.new_page()
            tab.goto(page.html.as_uri(), wait_until="load", timeout=120_000)
            words = word_problems(tab, f"at {PHONE['width']} px")
            tally["words_phone"] += len(words)
            page.problems += words
            tab.close()
        chapter = next(
            (p for p in pages_ if p.source is not None and p.source.suffix == ".ipynb"),
            None,
        )
        if chapter is not None:
            tab = phone.new_page()
            tab.goto(chapter.html.as_uri(), wait_until="load", timeout=120_000)
            tab.screenshot(path=str(shots / "phone-chapter.png"), full_page=False)
        scorecard = next(
            (p for p in pages_ if p.html == build / f"{SCORECARD}.html"), None
        )
        tally["out_phone"] = 0
        if scorecard is not None and scorecard.html.is_file():
            tab = phone.new_page()
            tab.goto(scorecard.html.as_uri(), wait_until="load", timeout=120_000)
            total, out = verdict_problems(tab, f"at {PHONE['width']} px")
            tally["out_phone"] = len(out)
            scorecard.problems += out
            # A build that did not execute the scorecard (the structure build) has no
            # outputs to hold verdicts; an executed one must show them.
            executed = tab.locator("div.cell_output").count() > 0
            if scorecard.source is not None and executed and total == 0:
                scorecard.problems.append("no verdict cells on the scorecard")
            tab.screenshot(path=str(shots / "phone-scorecard.png"), full_page=False)
        browser.close()
    return tally


def find_chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), *CHROMIUM, shutil.which("chromium")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def main(argv: list[str]) -> int:
    build = Path(argv[0] if argv else ROOT / "_build" / "structure").resolve()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages_ = pages(build, toc)
    cache: dict[Path, set[str]] = {}
    for page in pages_:
        check_html(page, build, config, cache)
    chromium = find_chromium()
    if chromium is None:
        banner = "#" * 78
        print(
            f"{banner}\n# BROWSER TEST SKIPPED: Chromium not found (install Debian's `chromium`).\n"
            f"# Only the link and Colab checks ran.\n{banner}",
            file=sys.stderr,
        )
        if os.environ.get("CI"):
            return 1
    else:
        tally = check_in_browser(
            pages_, toc, build, build.parent / "screenshots", chromium
        )
        print(
            f"layout at {DESKTOP['width']} px: {tally['tables']} tables and "
            f"{tally['outputs']} output blocks wider than their container, "
            f"{tally['images']} images under {MIN_SHOWN:.0%} of their width, {tally['listings']} "
            f"listings that scroll; verdict cells out of view: {tally['out_1280']} of "
            f"{tally['verdicts']} at {DESKTOP['width']} px, {tally['out_phone']} on the "
            f"scorecard at {PHONE['width']} px; words broken in table cells: "
            f"{tally['words_1280']} at {DESKTOP['width']} px, {tally['words_phone']} at "
            f"{PHONE['width']} px; figures without a caption: {tally['captions']}"
        )
    bad = [p for p in pages_ if p.problems]
    for page in bad:
        print(f"{page.html.relative_to(build)}:")
        for problem in page.problems:
            print(f"  - {problem}")
    notebooks = sum(
        p.source is not None and p.source.suffix == ".ipynb" for p in pages_
    )
    where = "in Chromium" if chromium else "in the HTML only"
    print(
        f"browser check {where}: {len(pages_)} pages, {notebooks} notebooks, {len(bad)} with problems"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
