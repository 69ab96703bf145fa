"""normlab.interactive: charts as outputs that need no kernel, the bundle and its extension."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from types import SimpleNamespace

import altair as alt
import ipywidgets
import pandas as pd
import pytest
import yaml
from myst_nb.core.render import get_mime_priority
from normlab import interactive as iv
from normlab_book import interactive as extension

ROOT = Path(__file__).resolve().parents[1]


def chart(rows: int = 3, text: str = "a") -> alt.Chart:
    data = pd.DataFrame({"x": range(rows), "y": range(rows), "label": [text] * rows})
    return alt.Chart(data).mark_line().encode(x="x:Q", y="y:Q")


def embedded_spec(html: str, chart_id: str) -> dict:
    match = re.search(
        rf'<script type="application/json" id="{chart_id}-spec">(.*?)</script>',
        html,
        re.S,
    )
    assert match is not None
    return json.loads(match.group(1))


def test_the_html_inlines_the_spec_and_embeds_it_in_its_div() -> None:
    figure = iv.Interactive(chart(), "a line", png=False)
    html = figure.html()
    assert f'<div class="{iv.MARKER}" id="{figure.id}"' in html
    assert embedded_spec(html, figure.id) == figure.spec
    assert f'"{figure.id}"' in html and "vegaEmbed" in html
    assert "http" not in html.replace(figure.spec["$schema"], "")  # nothing to fetch


def test_no_data_can_close_the_script() -> None:
    figure = iv.Interactive(chart(text="</script><!--&"), "tricky", png=False)
    html = figure.html()
    assert html.count("</script>") == 2 and "<!--" not in html
    assert embedded_spec(html, figure.id) == figure.spec


def test_a_chart_with_too_much_data_is_refused() -> None:
    small = iv.Interactive(chart(10), "small", png=False)
    assert 0 < small.data_bytes < iv.MAX_DATA_BYTES
    with pytest.raises(ValueError, match="at most 300000"):
        iv.Interactive(chart(20_000, text="x" * 10), "big", png=False)


def test_bad_charts_are_named() -> None:
    with pytest.raises(TypeError, match="chart must be an Altair chart"):
        iv.Interactive({"mark": "line"}, "no schema")
    with pytest.raises(TypeError, match="twin must be an Interactive"):
        iv.LiveAndStatic(ipywidgets.Button(), chart())
    with pytest.raises(TypeError, match="live must be a displayable ipywidget"):
        iv.LiveAndStatic(object(), iv.Interactive(chart(), "x", png=False))


def test_the_mime_bundle_has_html_a_png_and_text() -> None:
    bundle = iv.Interactive(chart(), "a line")._repr_mimebundle_()
    png = base64.b64decode(bundle["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert iv.MARKER in bundle["text/html"] and bundle["text/plain"] == "<a line>"


def test_live_and_static_carries_the_widget_and_its_twin() -> None:
    button = ipywidgets.Button(description="live")
    twin = iv.Interactive(chart(), "the twin", png=False)
    bundle = iv.LiveAndStatic(button, twin)._repr_mimebundle_()
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == button.model_id
    assert bundle["text/html"] == twin.html() and bundle["text/plain"] == "<the twin>"


def test_the_book_shows_the_twin_and_jupyter_the_widget() -> None:
    """_config.yml ranks text/html above the widget view in the HTML build, and nothing else."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    overrides = [tuple(o) for o in config["nb_mime_priority_overrides"]]
    html = get_mime_priority("html", overrides)
    widget = "application/vnd.jupyter.widget-view+json"
    assert html.index("text/html") < html.index(widget) < html.index("image/png")
    assert get_mime_priority("latex", overrides) == get_mime_priority("latex", [])
    local = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"][
        "local_extensions"
    ]
    assert local["normlab_book.interactive"] == "book/_ext"
    assert (ROOT / local["normlab_book.interactive"] / "normlab_book").is_dir()


def test_the_bundle_is_wrapped_and_matches_altairs_vega_lite() -> None:
    import vl_convert

    assert iv.vegalite_version() in vl_convert.get_vegalite_versions()
    script = iv.bundle()
    assert script.startswith("(function () {\n") and script.endswith("\n})();\n")
    assert "window.vegaEmbed" in script and len(script) > 100_000


class FakeApp:
    def __init__(self, outdir: Path, fmt: str = "html") -> None:
        self.outdir = outdir
        self.builder = SimpleNamespace(format=fmt)
        self.js: list[str] = []
        self.events: dict[str, object] = {}

    def add_js_file(self, name: str) -> None:
        self.js.append(name)

    def connect(self, event: str, handler: object) -> None:
        self.events[event] = handler


def test_the_extension_loads_the_bundle_only_where_a_chart_is(tmp_path: Path) -> None:
    app = FakeApp(tmp_path)
    assert extension.setup(app)["parallel_read_safe"]
    on_page = app.events["html-page-context"]
    on_page(app, "a", "page.html", {"body": "<p>no chart</p>"}, None)
    assert app.js == []
    html = iv.Interactive(chart(), "x", png=False).html()
    on_page(app, "b", "page.html", {"body": html}, None)
    assert app.js == [iv.BUNDLE]


def test_the_extension_writes_the_bundle_after_an_html_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(iv, "bundle", lambda: "(function () {\n})();\n")
    written = tmp_path / "html" / "_static" / iv.BUNDLE
    extension._write_bundle(FakeApp(tmp_path / "html"), RuntimeError("build failed"))
    extension._write_bundle(FakeApp(tmp_path / "html", fmt="latex"), None)
    assert not written.exists()
    extension._write_bundle(FakeApp(tmp_path / "html"), None)
    assert written.read_text() == "(function () {\n})();\n"


def test_a_choice_is_a_control_only_where_there_is_one() -> None:
    fixed = iv.choice("t", 3, [3], "T ").param.to_dict()
    assert fixed == {"name": "t", "value": 3}
    radio = iv.choice("tau", 0.5, [0.5, 2.0], "tau ").param.to_dict()
    assert radio["bind"] == {
        "input": "radio",
        "options": [0.5, 2.0],
        "labels": ["0.5", "2"],
        "name": "tau ",
    }
