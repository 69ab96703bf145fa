"""Job arrays through submitit (normlab.experiments.cluster): the same records as a plain
run, and a killed array task that resumes when the command is run again."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from normlab import experiments
from normlab.__main__ import main
from normlab.experiments import cluster

NAME, SEEDS = "cnn_normalisers", 1  # 18 quick runs, each well under a second
METRICS = ["train_loss", "val_loss", "val_metric", "test_loss", "test_metric", "steps"]
CPU = cluster.Resources(gpus_per_task=0, array_parallelism=2, runs_per_task=9)


def _metrics(out: Path) -> pd.DataFrame:
    table = pd.read_csv(out / NAME / "quick" / "results.csv")
    return table.sort_values("run_id").set_index("run_id")[METRICS]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("plain")
    experiments.run(NAME, profile="quick", seeds=SEEDS, out=out, device="cpu")
    return _metrics(out)


def test_plan_stays_under_the_array_cap() -> None:
    size = experiments.get("fc_normalisers").grid("paper").size()
    cut = cluster.plan("fc_normalisers", "paper", "/nonexistent", max_array_size=1000)
    assert size > 1000 and cut.n_shards == 1000
    assert cut.pending == tuple(range(1000)) and cut.pending_runs == size
    few = cluster.plan("fc_normalisers", "paper", "/nonexistent", runs_per_task=500)
    assert few.n_shards == -(-size // 500)


def test_plan_shards_are_the_runners_shards(tmp_path: Path) -> None:
    runs = experiments.get(NAME).runs("quick", SEEDS)
    cut = cluster.plan(NAME, "quick", tmp_path, SEEDS, runs_per_task=4)
    assert cut.n_shards == 5 and cut.pending_runs == len(runs) == 18
    shards = [experiments.shard(runs, (k, 5)) for k in range(5)]
    assert sorted(r.run_id for s in shards for r in s) == sorted(r.run_id for r in runs)


def test_slurm_submits_one_array(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--executor slurm`` writes one sbatch array script (sbatch itself is faked)."""
    import submitit

    scripts: list[str] = []

    def sbatch(self, *args, **kwargs) -> str:
        scripts.append(Path(self.command[-1]).read_text())
        return "Submitted batch job 4242\n"

    argv = ["run", NAME, "--profile", "quick", "--out", str(tmp_path), "--seeds", "1"]
    argv += ["--executor", "slurm", "--partition", "gpu", "--time", "90"]
    argv += ["--runs-per-task", "4", "--array-parallelism", "2"]
    assert main(argv) == 2  # no Slurm on this machine: one clear error line
    assert "needs Slurm on this machine" in capsys.readouterr().err
    monkeypatch.setattr(submitit.SlurmExecutor, "affinity", classmethod(lambda c: 1))
    monkeypatch.setattr(submitit.core.utils.CommandFunction, "__call__", sbatch)
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "18 unfinished runs in 5 of 5 shards" in said and "array job 4242" in said
    (script,) = scripts
    for line in ("--array=0-4%2", "--partition=gpu", "--time=90", "--gpus-per-node=1"):
        assert f"#SBATCH {line}" in script


def test_local_executor_gives_the_plain_results(
    plain: pd.DataFrame, tmp_path: Path, capsys
) -> None:
    argv = ["run", NAME, "--profile", "quick", "--out", str(tmp_path), "--seeds"]
    argv += [str(SEEDS), "--device", "cpu", "--threads", "1", "--executor", "local"]
    argv += ["--gpus-per-task", "0", "--runs-per-task", "9", "--array-parallelism", "2"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "18 unfinished runs in 2 of 2 shards" in said and "ran 18" in said
    pd.testing.assert_frame_equal(_metrics(tmp_path), plain, rtol=1e-6)
    # Run again: nothing left to do, nothing submitted.
    again = cluster.plan(NAME, "quick", tmp_path, SEEDS, runs_per_task=9)
    assert again.pending == () and again.pending_runs == 0


def test_a_killed_task_resumes(
    plain: pd.DataFrame, tmp_path: Path, interruptible_children: None
) -> None:
    """submitit cancels a local job with SIGINT (``interruptible_children``: also when the
    tests run as a background job, which ignores it)."""
    common = dict(profile="quick", out=tmp_path, seeds=SEEDS, device="cpu", threads=1)
    first = cluster.submit(NAME, executor="local", resources=CPU, **common)
    assert first.plan.pending == (0, 1)
    first.jobs[0].cancel()  # still importing torch: killed before its first run ends
    ran, failed = first.wait()
    assert failed == 1 and len(ran) == 9
    left = cluster.plan(NAME, "quick", tmp_path, SEEDS, runs_per_task=9)
    assert left.pending == (0,) and left.pending_runs == 9
    second = cluster.submit(NAME, executor="local", resources=CPU, **common)
    assert second.plan.pending == (0,)
    ran, failed = second.wait()
    assert failed == 0 and len(ran) == 9
    experiments.report(NAME, profile="quick", out=tmp_path)
    pd.testing.assert_frame_equal(_metrics(tmp_path), plain, rtol=1e-6)


def test_debug_executor_runs_in_process(plain: pd.DataFrame, tmp_path: Path) -> None:
    done = cluster.submit(
        NAME,
        executor="debug",
        profile="quick",
        out=tmp_path,
        seeds=SEEDS,
        device="cpu",
        resources=cluster.Resources(runs_per_task=6),
    )
    ran, failed = done.wait()
    assert failed == 0 and len(ran) == 18 and done.plan.n_shards == 3
    experiments.report(NAME, profile="quick", out=tmp_path)
    pd.testing.assert_frame_equal(_metrics(tmp_path), plain, rtol=1e-6)


def test_executor_errors(tmp_path: Path, capsys) -> None:
    base = ["run", NAME, "--profile", "quick", "--out", str(tmp_path)]
    assert main([*base, "--executor", "local", "--shard", "0/2"]) == 2
    assert "--shard and --executor" in capsys.readouterr().err
    assert main([*base, "--executor", "local", "--runs-per-task", "0"]) == 2
    assert "runs_per_task must be a positive int" in capsys.readouterr().err
    with pytest.raises(ValueError, match="executor"):
        cluster.submit(NAME, executor="pbs", profile="quick", out=tmp_path)
