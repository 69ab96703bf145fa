"""The command line's fault paths (issue 27): one ``error:`` line and exit 2, Ctrl-C exits 130,
``--version``; and two processes sharing one ``--out`` share the work through per-run locks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import normlab
import pytest
import torch
from normlab import experiments
from normlab.__main__ import main
from normlab._lock import FileLock
from normlab.experiments import grid, runner
from test_cli import SHARD, run_args

ROOT = Path(__file__).resolve().parents[1]


def shard_runs(shard: str = SHARD) -> list:
    return experiments.shard(
        experiments.get("fc_normalisers").runs("quick", seeds=1), shard
    )


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"normlab {normlab.__version__}"


def test_an_unwritable_out_is_refused_before_anything_runs(
    tmp_path: Path, capsys
) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert main(run_args(blocker / "runs", "--device", "cpu")) == 2
    line = one_error_line(capsys)
    assert "--out" in line and "not a writable folder" in line and "a_file" in line


def test_scorecard_out_into_a_files_path(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert main(["scorecard", "--out", str(blocker / "card.md")]) == 2
    line = one_error_line(capsys)
    assert "--out" in line and "cannot be written" in line
    assert blocker.read_text() == "x"


def test_a_bogus_device(tmp_path: Path, capsys) -> None:
    assert main(run_args(tmp_path, "--device", "bogus")) == 2
    assert "--device 'bogus' is not a torch device" in one_error_line(capsys)
    assert not (tmp_path / "fc_normalisers").exists()


@pytest.mark.parametrize("device", ["meta", "xpu", "hpu", "ipu"])
def test_a_device_normlab_does_not_run_on(tmp_path: Path, capsys, device: str) -> None:
    """torch knows these device types (meta holds no data; the others this build may lack):
    refused before anything runs, not a traceback from inside the first run."""
    assert main(run_args(tmp_path, "--device", device)) == 2
    line = one_error_line(capsys)
    assert (
        f"--device {device!r}" in line and "expected cpu, cuda, cuda:N or mps" in line
    )
    assert not (tmp_path / "fc_normalisers").exists()


@pytest.mark.parametrize("command", ["run", "save"])
@pytest.mark.parametrize("seeds", ["1000000000000", "1001", "0", "-3"])
def test_a_seeds_count_out_of_range_is_refused_at_once(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, command: str, seeds: str
) -> None:
    """10**12 seeds built the grid in memory for a minute, then failed with a traceback: the
    count is refused before any grid is built (building one fails this test, fast)."""

    def built(*args, **kwargs):
        raise AssertionError("the grid was built before --seeds was checked")

    monkeypatch.setattr(grid.Grid, "configs", built)
    monkeypatch.setattr(grid.Grid, "size", built)
    if command == "run":
        args = run_args(tmp_path, "--seeds", seeds)
    else:
        args = ["save", "fc_normalisers", "--profile", "cpu", "--root", str(tmp_path)]
        args += ["--seeds", seeds]
    assert main(args) == 2
    line = one_error_line(capsys)
    assert f"--seeds must be an int from 1 to 1000, got {seeds}" in line
    assert not list(tmp_path.iterdir())


def test_a_grid_refuses_a_seeds_count_out_of_range() -> None:
    quick = experiments.get("fc_normalisers").grid("quick")
    # 10**12 is not tried: without the check it would fill the memory (size() builds the
    # configurations of a grid with a `where`)
    for call, seeds in [
        (quick.size, 1001),
        (quick.size, True),
        (quick.configs, 1001),
        (quick.configs, 0),
    ]:
        with pytest.raises(ValueError, match="seeds must be an int from 1 to 1000"):
            call(seeds)
    assert quick.size(1000) == len(quick.configs(1000))


def test_scorecard_root_that_does_not_exist(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "no_such_folder"
    assert main(["scorecard", "--root", str(missing)]) == 2
    line = one_error_line(capsys)
    assert f"--root {str(missing)!r} is not a folder" in line
    assert capsys.readouterr().out == ""


def test_scorecard_out_that_is_not_a_regular_file_is_left_alone(
    tmp_path: Path, capsys
) -> None:
    """Writing renames a new file over ``--out``: over a device such as /dev/null (as root),
    a folder, a pipe or a link it would replace the thing itself, so each is refused and left
    as it was. (Not tried on /dev/null itself: a regression would replace this machine's.)"""
    target = tmp_path / "target.md"
    target.write_text("kept")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "nowhere.md")
    folder = tmp_path / "folder"
    folder.mkdir()
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for out, kind in [
        (link, "a symbolic link"),
        (dangling, "a symbolic link"),
        (folder, "not a regular file"),
        (pipe, "not a regular file"),
    ]:
        assert main(["scorecard", "--out", str(out)]) == 2
        line = one_error_line(capsys)
        assert f"--out {str(out)!r} is {kind}" in line, line
    assert link.is_symlink() and dangling.is_symlink() and target.read_text() == "kept"
    assert folder.is_dir() and not list(folder.iterdir()) and pipe.is_fifo()
    assert not (tmp_path / "nowhere.md").exists()


def test_scorecard_out_replaces_a_regular_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "card.csv"
    out.write_text("old")
    assert main(["scorecard", "--format", "csv", "--out", str(out)]) == 0
    assert out.read_text().startswith("id,kind,paper,ours")
    assert "written to" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu(tmp_path: Path, capsys) -> None:
    assert main(run_args(tmp_path, "--device", "cuda")) == 2
    line = one_error_line(capsys)
    assert (
        "--device 'cuda'" in line and "no CUDA GPU" in line and "--device cpu" in line
    )


def test_a_corrupt_checkpoint_is_named_without_torchs_unsafe_hint(
    tmp_path: Path, capsys
) -> None:
    first = shard_runs()[0].run_id
    folder = tmp_path / "fc_normalisers" / "quick" / "checkpoints" / first
    folder.mkdir(parents=True)
    (folder / "last.pt").write_bytes(b"not a checkpoint" * 10)
    assert main(run_args(tmp_path, "--device", "cpu")) == 2
    line = one_error_line(capsys)
    assert "last.pt is not a checkpoint of this package" in line and str(folder) in line
    assert "weights_only=False" not in line


def test_save_shows_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """``save`` leaves the choice to the runner (a bar on a terminal) instead of forcing it off."""
    from normlab import results

    seen = {}

    def fake_run(name: str, **kwargs) -> None:
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", fake_run)
    with pytest.raises(KeyboardInterrupt):
        results.save(
            "fc_normalisers",
            experiments.RunSettings(profile="cpu"),
            root="unused",
            allow_dirty=True,
        )
    assert seen["progress"] is None


def test_ctrl_c_during_run_exits_130_with_the_finished_runs_saved(
    tmp_path: Path, interruptible_children: None
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "companion"),
        "NORMLAB_PROFILE": "quick",
        "OMP_NUM_THREADS": "1",
    }
    args = run_args(tmp_path, "--device", "cpu", "--threads", "1")
    # every quick run (42, some seconds each): SIGINT after the first lands mid-grid even on
    # a loaded machine (six runs could all finish before the signal arrived)
    args[args.index(SHARD)] = "0/1"
    total = len(shard_runs("0/1"))
    process = subprocess.Popen(
        [sys.executable, "-m", "normlab", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    records = tmp_path / "fc_normalisers" / "quick" / "runs"
    deadline = time.monotonic() + 240
    while not list(records.glob("*.json")) and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("error: interrupted")
    finished = sorted(records.glob("*.json"))
    assert 1 <= len(finished) < total
    assert all(json.loads(p.read_text())["metrics"] for p in finished)  # whole files
    table = (tmp_path / "fc_normalisers" / "quick" / "results.csv").read_text()
    assert len(table.strip().splitlines()) == 1 + len(finished)
    assert not list(records.glob(".*"))  # no temporary file left behind


# ---------------------------------------------------------------------- per-run locks


def _hold_then(lock: FileLock, seconds: float, then=None) -> threading.Thread:
    """Release ``lock`` (as another process would, after ``then``) in ``seconds``."""

    def release() -> None:
        time.sleep(seconds)
        if then is not None:
            then()
        lock.release()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_a_lock_removed_by_its_holder_passes_to_one_waiter_at_a_time(
    tmp_path: Path,
) -> None:
    """A holder that removes the file as it releases it leaves a waiter locking a file no
    one else can see: the waiter must lock the file now at the path, so that a third
    process cannot take the lock beside it."""
    path = tmp_path / "pack.lock"
    holder, waiter = FileLock(path), FileLock(path)
    assert holder.acquire(blocking=False)
    thread = threading.Thread(target=waiter.acquire)
    thread.start()
    time.sleep(0.2)  # the waiter blocks on the holder's file
    holder.release(remove=True)
    thread.join(timeout=10)
    assert not thread.is_alive() and waiter._fd is not None
    assert not FileLock(path).acquire(blocking=False)  # the waiter's lock is the path's
    waiter.release(remove=True)
    assert FileLock(path).acquire(blocking=False)


def test_a_run_another_process_holds_is_done_last_after_saying_why_it_waits(
    tmp_path: Path, capsys
) -> None:
    runs = shard_runs()
    folder = runner.results_folder("fc_normalisers", tmp_path, "quick")
    held = runs[0].run_id
    lock = FileLock(folder / "checkpoints" / f"{held}.lock")
    assert lock.acquire(blocking=False)
    thread = _hold_then(lock, 3.0)  # the holder dies without finishing the run
    report = runner.run(
        "fc_normalisers",
        profile="quick",
        out=tmp_path,
        seeds=1,
        shard=SHARD,
        device="cpu",
        progress=False,
    )
    thread.join()
    assert report.ran[-1] == held and len(report.ran) == len(runs)
    err = capsys.readouterr().err
    assert f"{held}: waiting for process {os.getpid()}, which is running it" in err
    assert not (folder / "checkpoints").exists()  # locks and checkpoints cleaned up


def test_a_run_finished_by_the_other_process_is_skipped(tmp_path: Path) -> None:
    runs = shard_runs()
    folder = runner.results_folder("fc_normalisers", tmp_path, "quick")
    held = runs[-1].run_id
    lock = FileLock(folder / "checkpoints" / f"{held}.lock")
    assert lock.acquire(blocking=False)

    def finish() -> None:  # the other process writes its record before it lets go
        first = folder / "runs" / f"{runs[0].run_id}.json"
        deadline = time.monotonic() + 120
        while not first.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        record = {**json.loads(first.read_text()), "run_id": held}
        record["config"] = dict(runs[-1].config)
        (folder / "runs" / f"{held}.json").write_text(json.dumps(record))

    thread = _hold_then(lock, 1.0, finish)
    report = runner.run(
        "fc_normalisers",
        profile="quick",
        out=tmp_path,
        seeds=1,
        shard=SHARD,
        device="cpu",
        progress=False,
    )
    thread.join()
    assert report.skipped == [held] and held not in report.ran


def test_two_processes_on_one_out_share_the_work(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "companion"),
        "NORMLAB_PROFILE": "quick",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-m", "normlab", *run_args(tmp_path, "--device", "cpu")]
    both = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    ran = [int(out.split("ran ")[1].split(",")[0]) for out, _ in outputs]
    assert sum(ran) == len(shard_runs())  # every run done once, by one of the two
    records = sorted((tmp_path / "fc_normalisers" / "quick" / "runs").glob("*.json"))
    assert len(records) == len(shard_runs())
