"""Interactive figures for the HTML book: Vega-Lite charts that need no kernel and no network.

A reader of the HTML book has no kernel, so an ipywidget's controls do nothing there. A
Vega-Lite chart (built with Altair) carries its data and its controls (``params`` bound to
inputs) in its spec, and the browser redraws it as a control moves.

- :class:`Interactive`: one chart as a cell output: a ``<div>`` and a ``vegaEmbed`` call with
  the spec and its data inlined (``text/html``), plus a PNG of the chart at its starting
  values (``image/png``) and a line of text for other front ends. Front ends that rank HTML
  first but lack the bundle (JupyterLab) show a note in its place, so a chapter shows a
  twin through :class:`LiveAndStatic`.
- :class:`LiveAndStatic`: one output holding a live ipywidget and its static twin. Jupyter,
  JupyterLab and Colab render the widget; the HTML book renders the twin (``_config.yml``
  ranks ``text/html`` above the widget view for the ``html`` builder).
- :func:`widget_view`: the MIME bundle of a widget, from ipywidgets 7.7 (Colab's) or 8.
- :func:`choice`: a chart parameter bound to radio buttons, or fixed where there is one value.
- :func:`bundle`: the shared script (Vega, Vega-Lite and vega-embed, from
  ``vl-convert-python``), wrapped in a function so that its top-level names cannot clash
  with the page's own (Sphinx's ``_``).

The book's build writes the bundle into its ``_static`` folder and loads it on each page that
has a chart: a Sphinx extension in the book's tooling (``book/_ext/normlab_book/interactive.py``),
not in this package.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any

from ._extras import require

__all__ = [
    "BUNDLE",
    "MARKER",
    "MAX_DATA_BYTES",
    "Interactive",
    "LiveAndStatic",
    "widget_view",
    "choice",
    "bundle",
    "vegalite_version",
]

#: The bundle's file name under the build's ``_static`` folder.
BUNDLE = "normlab-vega.js"
#: The class of every chart's ``<div>``: the Sphinx extension loads the bundle on a page that
#: has one, and the browser test finds the charts by it.
MARKER = "normlab-vega"
#: The most inlined data (JSON bytes) one page may carry.
MAX_DATA_BYTES = 300_000


def vegalite_version() -> str:
    """Altair's Vega-Lite version as ``major.minor`` (the bundle's version must match it)."""
    altair = require("altair", "normlab.interactive")
    major, minor = altair.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return f"{major}.{minor}"


def bundle() -> str:
    """The Vega, Vega-Lite and vega-embed script, inside a function that sets only
    ``window.vegaEmbed``, ``window.vega`` and ``window.vegaLite``."""
    vl_convert = require("vl_convert", "normlab.interactive")
    version = vegalite_version()
    if version not in vl_convert.get_vegalite_versions():
        raise RuntimeError(
            f"vl-convert-python {vl_convert.__version__} has no Vega-Lite {version} "
            f"(Altair's); it has {', '.join(vl_convert.get_vegalite_versions())}"
        )
    return (
        f"(function () {{\n{vl_convert.javascript_bundle(vl_version=version)}\n}})();\n"
    )


def choice(
    name: str,
    value: Any,
    options: list[Any],
    label: str,
    labels: list[str] | None = None,
) -> Any:
    """An Altair parameter bound to radio buttons over ``options`` (shown as ``labels``, by
    default the options themselves, numbers as ``%g``); with one option, a fixed parameter
    and no control."""
    altair = require("altair", "normlab.interactive")
    if len(options) < 2:
        return altair.param(name=name, value=value)
    shown = labels or [f"{o:g}" if isinstance(o, float) else str(o) for o in options]
    bind = altair.binding_radio(options=options, labels=shown, name=label)
    return altair.param(name=name, value=value, bind=bind)


def _spec(chart: Any) -> dict[str, Any]:
    if isinstance(chart, dict):
        spec = chart
    else:
        altair = require("altair", "normlab.interactive")
        # the size that matters is the page's, in bytes (MAX_DATA_BYTES), not Altair's row count
        with altair.data_transformers.enable("default", max_rows=None):
            spec = chart.to_dict()
    if not isinstance(spec, dict) or "$schema" not in spec:
        raise TypeError(
            f"chart must be an Altair chart or a Vega-Lite spec dict with a $schema, got {type(chart).__name__}"
        )
    return spec


def _json_for_script(value: Any) -> str:
    """JSON that is safe inside ``<script>``: no ``</script>`` or ``<!--`` can appear."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# Draw the chart once the bundle has loaded; say so in the chart's place if it never does.
_EMBED = """(function () {{
  var id = "{id}";
  function draw() {{
    var el = document.getElementById(id);
    if (!window.vegaEmbed) {{
      el.textContent = "(interactive figure: its script, _static/{bundle}, did not load)";
      return;
    }}
    var spec = JSON.parse(document.getElementById(id + "-spec").textContent);
    window.vegaEmbed(el, spec, {{actions: false, renderer: "svg"}}).catch(function (e) {{
      el.textContent = "(interactive figure failed: " + e + ")";
    }});
  }}
  if (document.readyState === "complete") draw(); else window.addEventListener("load", draw);
}})();"""


class Interactive:
    """One Vega-Lite chart as a cell output that works without a kernel.

    Args:
        chart: an Altair chart (or a Vega-Lite spec dict); its data are inlined.
        description: one line for front ends that show neither HTML nor images.
        png: also give a PNG of the chart at its starting values (``image/png``).

    Raises ``ValueError`` when the inlined data exceed :data:`MAX_DATA_BYTES`.
    """

    def __init__(self, chart: Any, description: str, png: bool = True) -> None:
        self.spec = _spec(chart)
        self.description = description
        self.png = png
        self.data_bytes = len(
            json.dumps(
                [self.spec.get("datasets", {}), self.spec.get("data", {})],
                separators=(",", ":"),
            ).encode()
        )
        if self.data_bytes > MAX_DATA_BYTES:
            raise ValueError(
                f"chart inlines {self.data_bytes} bytes of data; expected at most {MAX_DATA_BYTES} "
                "(reduce it: fewer rows, rounded numbers)"
            )
        digest = hashlib.sha1(_json_for_script(self.spec).encode()).hexdigest()[:12]
        self.id = f"{MARKER}-{digest}"

    def html(self) -> str:
        """The ``<div>``, the spec as JSON and the script that embeds it."""
        return (
            f'<div class="{MARKER}" id="{self.id}" role="figure" '
            f'aria-label="{html.escape(self.description)}"></div>\n'
            f'<script type="application/json" id="{self.id}-spec">'
            f"{_json_for_script(self.spec)}</script>\n"
            f"<script>{_EMBED.format(id=self.id, bundle=BUNDLE)}</script>"
        )

    def to_png(self) -> bytes:
        """The chart at its starting values, as PNG bytes (rendered by vl-convert)."""
        vl_convert = require("vl_convert", "normlab.interactive")
        return vl_convert.vegalite_to_png(
            self.spec, scale=1.5, vl_version=vegalite_version()
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        out = {"text/html": self.html(), "text/plain": f"<{self.description}>"}
        if self.png:
            out["image/png"] = base64.b64encode(self.to_png()).decode("ascii")
        return out


def widget_view(widget: Any) -> dict[str, Any]:
    """The MIME bundle that shows ``widget``, an ipywidget of ipywidgets 7.7 or 8.

    ipywidgets 8 gives it (``_repr_mimebundle_``). ipywidgets 7.7, which Colab ships,
    displays a widget itself (``_ipython_display_``) and has none, so the bundle is built
    here as 7.7 builds it, and the widget is told that it is shown, as 7.7 tells it: its
    ``interactive`` draws the first output only then.
    """
    own = getattr(widget, "_repr_mimebundle_", None)
    if callable(own):
        return own()
    bundle: dict[str, Any] = {"text/plain": repr(widget)}
    if widget._view_name is not None:
        bundle["application/vnd.jupyter.widget-view+json"] = {
            "version_major": 2,
            "version_minor": 0,
            "model_id": widget.model_id,
        }
        widget._handle_displayed()
    return bundle


class LiveAndStatic:
    """A live ipywidget and its static twin as one output.

    Front ends with a kernel and the widget manager (Jupyter, JupyterLab, Colab) render the
    widget view, which they rank first; the HTML book ranks ``text/html`` first and shows
    the twin; other front ends fall back to the twin's PNG or text. The widget may come
    from ipywidgets 7.7 or 8 (:func:`widget_view`).
    """

    def __init__(self, live: Any, twin: Interactive) -> None:
        if not isinstance(live, require("ipywidgets", "LiveAndStatic").Widget):
            raise TypeError(
                f"live must be a displayable ipywidget, got {type(live).__name__}"
            )
        if not isinstance(twin, Interactive):
            raise TypeError(f"twin must be an Interactive, got {type(twin).__name__}")
        self.live, self.twin = live, twin

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        return {**widget_view(self.live), **self.twin._repr_mimebundle_()}
