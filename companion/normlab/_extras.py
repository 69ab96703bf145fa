"""Optional dependencies: the packages that only the book's chapters need, each in an extra.

``import normlab`` and the library (layers, models, data, training) need only the core
install. A module that needs an optional package imports it through :func:`require`, which
names the extra to install when the package is missing::

    sp = require("sympy", "normlab.symbolic")  # pip install "normlab[symbolic]"
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: Importable module -> (its distribution, the extra of pyproject.toml that installs it).
EXTRAS: dict[str, tuple[str, str]] = {
    "sympy": ("sympy", "symbolic"),
    "ipywidgets": ("ipywidgets", "widgets"),
    "nltk": ("nltk", "text"),
    "altair": ("altair", "interactive"),
    "vl_convert": ("vl-convert-python", "interactive"),
}


class MissingExtraError(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra that installs it."""


def require(module: str, needed_by: str) -> ModuleType:
    """Import ``module`` (a key of :data:`EXTRAS`, or one of its submodules) for
    ``needed_by``, or say how to install it.

    Raises:
        MissingExtraError: when ``module`` cannot be imported, naming the extra
            (``pip install "normlab[symbolic]"``).
    """
    distribution, extra = EXTRAS[module.split(".")[0]]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"{needed_by} needs {distribution}, which is not installed; install it with "
            f'pip install "normlab[{extra}]" (or "normlab[notebooks]" for every chapter)',
            name=module,
        ) from err
