"""Chapter 16's tables: one part of the scorecard as Markdown, chapters linked to their notebooks."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from normlab import claims

COLUMNS = [
    "id",
    "claim",
    "paper",
    "ours",
    "n",
    "profile",
    "data",
    "verdict",
    "chapter",
    "note",
]
SHOWN = ["verdict", "id", "claim", "chapter"]


def card() -> pd.DataFrame:
    rows = [("A1", "I", 2), ("A9", "I", 7), ("N7", "II", 15), ("N1", "II", 11)]
    return pd.DataFrame(
        [
            {
                **{c: f"{claim_id} {c}" for c in COLUMNS},
                "id": claim_id,
                "part": part,
                "chapter": chapter,
                "rule": "r",
                "claim": "a | b",
            }
            for claim_id, part, chapter in rows
        ]
    )


def test_chapter_link_points_at_the_notebook_when_it_exists(tmp_path: Path) -> None:
    (tmp_path / "02_affine.ipynb").write_text("{}")
    assert claims.chapter_link(2, tmp_path) == "[2](02_affine.ipynb)"
    assert claims.chapter_link(7, tmp_path) == "7"
    assert claims.chapter_link(2) == "2"  # no folder named: the library knows no book
    book = Path(__file__).resolve().parents[1] / "book"
    assert claims.chapter_link(16, book) == "[16](16_scorecard.ipynb)"  # the book's own


def test_part_markdown_holds_only_that_part_in_order(tmp_path: Path) -> None:
    (tmp_path / "15_robustness.ipynb").write_text("{}")
    text = claims.part_markdown(card(), "II", book=tmp_path)
    table, evidence = text.split("<details>")
    lines = table.strip().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == SHOWN and lines[1] == "|" + "---|" * len(SHOWN)
    assert [line.split("|")[2].strip() for line in lines[2:]] == ["N7", "N1"]
    assert lines[2].startswith("| N7 verdict |")  # the verdict comes first
    assert lines[2].endswith("| [15](15_robustness.ipynb) |")
    assert lines[3].endswith("| 11 |")  # no notebook: the bare number
    assert "a \\| b" in lines[2]  # a pipe inside a cell is escaped
    assert "ours" not in table and "rule" not in table
    items = [line for line in evidence.splitlines() if line.startswith("- ")]
    assert [item.split("**")[1] for item in items] == ["N7", "N1"]
    assert "ours: N7 ours" in items[0] and "note: N7 note" in items[0]
    assert evidence.strip().endswith("</details>")


def test_commands_are_set_as_code_so_they_copy_as_typed() -> None:
    note = "needs a set: python -m normlab save batch_size --profile standard"
    frame = card().assign(note=note)
    text = claims.part_markdown(frame, "I")
    assert "`python -m normlab save batch_size --profile standard`" in text
    assert claims.markdown(frame[["id", "note"]]).count("`python -m normlab") == 4


def test_the_parts_it_accepts_are_the_registrys() -> None:
    assert {claim.part for claim in claims.CLAIMS.values()} == {"I", "II"}


def test_bad_arguments_name_the_argument() -> None:
    with pytest.raises(ValueError, match="number must be a positive int"):
        claims.chapter_link(0)
    with pytest.raises(ValueError, match="part='III'"):
        claims.part_markdown(card(), "III")
    with pytest.raises(ValueError, match="card must be a scorecard table"):
        claims.part_markdown(card().drop(columns="verdict"), "I")
