"""Notebook hygiene: no outputs, a python3 kernel, the Colab cell, and a table of contents
that lists every notebook and only files that exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.rglob("*.ipynb"))
NOTEBOOKS = [p for p in NOTEBOOKS if ".ipynb_checkpoints" not in p.parts]


def toc_files(toc: dict) -> list[str]:
    """Every ``file:`` entry of a jb-book table of contents, the root included."""
    found = [toc["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", toc.get("chapters", [])))
    return found


def notebook_problems(path: Path) -> list[str]:
    """What is wrong with one notebook file, as readable sentences."""
    nb = json.loads(path.read_text())
    problems = []
    spec = nb.get("metadata", {}).get("kernelspec", {})
    if spec.get("name") != "python3":
        problems.append(f"kernelspec name is {spec.get('name')!r}, expected 'python3'")
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for i, cell in enumerate(code):
        if cell.get("outputs"):
            problems.append(f"code cell {i} has outputs")
        if cell.get("execution_count") is not None:
            problems.append(f"code cell {i} has an execution count")
    first = code[0] if code else None
    if first is None or "google.colab" not in "".join(first["source"]):
        problems.append("the first code cell is not the Colab install cell")
    elif "remove-cell" not in first.get("metadata", {}).get("tags", []):
        problems.append("the Colab cell is not tagged remove-cell")
    return problems


def resolve(entry: str) -> list[Path]:
    return [
        p
        for p in (ROOT / f"{entry}.ipynb", ROOT / f"{entry}.md", ROOT / entry)
        if p.is_file()
    ]


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "book/ holds no notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path: Path) -> None:
    assert notebook_problems(path) == []


def test_every_toc_entry_exists() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    missing = [entry for entry in toc_files(toc) if not resolve(entry)]
    assert missing == []


def test_every_notebook_is_in_the_toc() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {str((ROOT / entry).with_suffix("")) for entry in toc_files(toc)}
    unlisted = [
        str(p.relative_to(ROOT))
        for p in NOTEBOOKS
        if str(p.with_suffix("")) not in listed
    ]
    assert unlisted == []


def test_checker_flags_a_dirty_notebook(tmp_path: Path) -> None:
    """The guard itself: a notebook with outputs, a count, no Colab cell and a wrong kernel."""
    dirty = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": ["1 + 1"],
                "execution_count": 3,
                "outputs": [
                    {"output_type": "execute_result", "data": {"text/plain": ["2"]}}
                ],
            }
        ],
        "metadata": {"kernelspec": {"name": "julia", "display_name": "Julia"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "dirty.ipynb"
    path.write_text(json.dumps(dirty))
    assert len(notebook_problems(path)) == 4
