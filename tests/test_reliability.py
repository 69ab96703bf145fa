"""Issue 52's faults: what a careless or hostile input may no longer do (a repeated run
pooled, a checkpoint that is a device, a lock that is a link, a float16 overflow, a broken
set in the reader's folder). The saved sets' own faults are in tests/test_results.py."""

from __future__ import annotations

import pandas as pd
import pytest
from normlab import analysis, claims, results


@pytest.fixture(scope="module")
def shipped_tables() -> dict[str, pd.DataFrame]:
    """The results tables of two shipped sets, read through the door."""
    root = results.shipped_root()
    return {
        name: results.load(root / name / "cpu").results
        for name in ("fc_normalisers", "gate_bottleneck")
    }


@pytest.mark.parametrize(
    "claim_id, experiment",
    [("A9", "fc_normalisers"), ("A15", "fc_normalisers"), ("N1", "gate_bottleneck")],
)
def test_a_table_that_repeats_a_run_is_refused(
    shipped_tables: dict[str, pd.DataFrame], claim_id: str, experiment: str
) -> None:
    """Duplicated (arm, seed) rows were pooled as more seeds (A9 and A15 changed verdict)
    or crashed pandas (gate_bottleneck); now the claim refuses the table, naming the run."""
    table = shipped_tables[experiment]
    assert analysis.runs.duplicated_runs(table) is None
    claims.judge(claims.get(claim_id), table)  # the set as shipped is judged
    doubled = pd.concat([table, table.iloc[:4]], ignore_index=True)
    assert "8 rows repeat a run" in analysis.runs.duplicated_runs(doubled)
    with pytest.raises(ValueError, match=f"claim {claim_id}: .*repeat a run.*seed="):
        claims.judge(claims.get(claim_id), doubled)


def test_a_repeated_run_id_is_found_without_config_columns() -> None:
    table = pd.DataFrame({"run_id": ["x-1", "x-2", "x-1"], "val": [1.0, 2.0, 3.0]})
    assert "2 rows repeat a run" in analysis.runs.duplicated_runs(table)
    assert analysis.runs.duplicated_runs(table.iloc[:2]) is None
