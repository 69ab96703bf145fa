"""Every notebook's Colab install cell installs from the repository that ``_config.yml`` names.

``_config.yml`` (``repository.url`` and ``repository.branch``) is the one place that names the
repository: the launch buttons read it, and the install cells are derived from it. After
changing it, rewrite the cells::

    python tests/test_colab.py --write
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(
    p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)
# The cell installs the ``notebooks`` extra: what the chapters import beyond the core.
INSTALL = re.compile(r'"normlab\[notebooks\] @ git\+(?P<url>[^@"]+)@(?P<branch>[^"]+)"')


def expected() -> tuple[str, str]:
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def install_cell(nb: dict) -> dict:
    """The first code cell, the one that installs normlab on Colab."""
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_install_cell_uses_the_configured_repository(path: Path) -> None:
    source = "".join(install_cell(json.loads(path.read_text()))["source"])
    match = INSTALL.search(source)
    assert match is not None, (
        f'{path.name}: no `pip install "normlab[notebooks] @ git+URL@BRANCH"` in the first cell'
    )
    assert (match["url"], match["branch"]) == expected(), (
        "rewrite with `python tests/test_colab.py --write`"
    )


def test_the_pattern_reads_the_cell() -> None:
    """The guard itself: the pattern finds URL and branch in the cell as written."""
    line = '    %pip install -q "normlab[notebooks] @ git+https://github.com/someone/fork@dev"'
    match = INSTALL.search(line)
    assert match is not None and (match["url"], match["branch"]) == (
        "https://github.com/someone/fork",
        "dev",
    )


def rewrite(path: Path) -> bool:
    """Point one notebook's install cell at the configured repository; True if it changed."""
    nb = json.loads(path.read_text())
    cell = install_cell(nb)
    url, branch = expected()
    source = "".join(cell["source"])
    new = INSTALL.sub(f'"normlab[notebooks] @ git+{url}@{branch}"', source)
    if new == source:
        return False
    cell["source"] = new.splitlines(keepends=True)
    tmp = path.with_suffix(".ipynb.tmp")
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return True


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_colab.py --write")
    for nb_path in NOTEBOOKS:
        if rewrite(nb_path):
            print(f"rewrote {nb_path.relative_to(ROOT)}")
