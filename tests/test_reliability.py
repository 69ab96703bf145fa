"""Issue 52's faults: what a careless or hostile input may no longer do (a repeated run
pooled, a checkpoint that is a device, a lock that is a link, a float16 overflow, a broken
set in the reader's folder). The saved sets' own faults are in tests/test_results.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch
from normlab import checkpoint, claims, results, run_tables
from normlab._lock import FileLock, LockError
from normlab_book import reader


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
    assert run_tables.duplicated_runs(table) is None
    claims.judge(claims.get(claim_id), table)  # the set as shipped is judged
    doubled = pd.concat([table, table.iloc[:4]], ignore_index=True)
    assert "8 rows repeat a run" in run_tables.duplicated_runs(doubled)
    with pytest.raises(ValueError, match=f"claim {claim_id}: .*repeat a run.*seed="):
        claims.judge(claims.get(claim_id), doubled)


def test_a_repeated_run_id_is_found_without_config_columns() -> None:
    table = pd.DataFrame({"run_id": ["x-1", "x-2", "x-1"], "val": [1.0, 2.0, 3.0]})
    assert "2 rows repeat a run" in run_tables.duplicated_runs(table)
    assert run_tables.duplicated_runs(table.iloc[:2]) is None


# ------------------------------------------------------------------------- checkpoints


def _payload() -> dict:
    """A checkpoint's state with every required key, of the right types."""
    return {
        "format": checkpoint.CHECKPOINT_FORMAT,
        "signature": [["w", [2, 2]], ["flag", None]],
        "run_config": {"lr": 0.1},
        "model": {"w": torch.zeros(2, 2)},
        "optimizer": {"state": {}, "param_groups": []},
        "scheduler": {},
        "rng": {k: 0 for k in ("torch", "cuda", "shuffle", "python", "numpy")},
        "callbacks": [["Early", {"best": 1.0}]],
        "history": [{"epoch": 1}],
        "epoch": 1,
        "step": 10,
        "stopped": False,
    }


@pytest.mark.parametrize(
    "key, value",
    [
        ("epoch", "1"),
        ("stopped", 1),
        ("model", [1, 2]),
        ("signature", {"w": [2, 2]}),
        ("signature", [[3, [2]]]),
        ("callbacks", [["Early", 5]]),
        ("history", [1, 2]),
        ("step", True),
    ],
)
def test_a_checkpoint_with_a_key_of_the_wrong_type_is_refused(
    tmp_path: Path, key: str, value: object
) -> None:
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    checkpoint._write(path, _payload())
    assert checkpoint.load(path)["epoch"] == 1
    checkpoint._write(path, {**_payload(), key: value})
    with pytest.raises(checkpoint.CheckpointError, match=f"wrong type for {key}"):
        checkpoint.load(path)


@contextlib.contextmanager
def _within(seconds: int) -> Iterator[None]:
    """Fail, instead of hanging the suite, if the block takes longer than ``seconds``."""

    def late(*_: object) -> None:
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "dev zero", "link to dev zero", "folder"])
def test_a_checkpoint_that_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    """A pipe used to hang for good, /dev/zero to exhaust memory: both are refused before
    anything is read, and so is a link (as the saved sets' files are)."""
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev zero":
        path = Path("/dev/zero")
    elif kind == "link to dev zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    why = "symbolic link" if kind.startswith("link") else "not a regular file"
    with _within(10), pytest.raises(checkpoint.CheckpointError, match=why):
        checkpoint.load(path)


def test_a_checkpoint_over_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    checkpoint._write(path, _payload())
    monkeypatch.setattr(checkpoint, "MAX_CHECKPOINT_BYTES", path.stat().st_size - 1)
    with pytest.raises(checkpoint.CheckpointError, match="larger than"):
        checkpoint.load(path)


# ------------------------------------------------------------------------------- locks


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(
    tmp_path: Path,
) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "checkpoints" / "pack.lock"
    link.parent.mkdir()
    link.symlink_to(target)
    with pytest.raises(LockError, match="is a symbolic link"):
        FileLock(link).acquire()
    assert target.read_text() == "keep me"
    link.unlink()
    link.symlink_to(
        tmp_path / "absent"
    )  # a dangling link is not created through either
    with pytest.raises(LockError, match="is a symbolic link"):
        FileLock(link).acquire(blocking=False)
    assert not (tmp_path / "absent").exists()


@contextlib.contextmanager
def _stopped_holder(path: Path) -> Iterator[int]:
    """A process that takes the lock at ``path`` and is then stopped (SIGSTOP)."""
    code = (
        "import os, signal, sys\n"
        "from normlab._lock import FileLock\n"
        f"FileLock({str(path)!r}).acquire()\n"
        "print('held', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait(10)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="POSIX signals")
def test_a_pack_waiting_on_a_stopped_holder_names_it_and_gives_up(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The next pack used to wait silently for ever: now it says whom it waits for, and
    gives up after results.PACK_WAIT seconds with an error naming that process."""
    folder = tmp_path / "exp" / "cpu"
    monkeypatch.setattr(results, "PACK_WAIT", 0.5)
    with _stopped_holder(folder / "checkpoints" / "pack.lock") as pid:
        with _within(20), pytest.raises(LockError, match=f"process {pid}, which holds"):
            results.pack(folder, command="c", wall_seconds=0.0, device="cpu")
    err = capsys.readouterr().err
    assert f"waiting for process {pid}, which is packing {folder}" in err
    assert "giving up after 0.5 s" in err


# ------------------------------------------------------------------- PatchNorm in float16


@pytest.mark.parametrize("mode", ["affine_like", "norm_like"])
@pytest.mark.parametrize("pixel", [8192.0, 60000.0])
def test_patchnorm_in_float16_is_finite_beside_one_large_pixel(
    mode: str, pixel: float
) -> None:
    """One pixel of 8192 or more used to make the other patches' norms underflow float16
    (0 / 0): the output and the gradients are finite, float16, and within float16's
    rounding of a float64 reference."""
    from normlab.layers import PatchNormConv2d

    torch.manual_seed(0)
    layer = PatchNormConv2d(3, 4, 3, 1, 1, mode=mode).to(torch.float16)
    x = torch.randn(2, 3, 8, 8).to(torch.float16)
    x[0, 0, 3, 3] = pixel
    x.requires_grad_(True)
    out = layer(x)
    out.float().sum().backward()
    assert out.dtype == torch.float16
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())
    reference = PatchNormConv2d(3, 4, 3, 1, 1, mode=mode).double()
    reference.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    want = reference(x.detach().double())
    assert torch.allclose(out.double(), want, rtol=2e-3, atol=2e-3)


# -------------------------------------------------------------- the reader-notebook build


def _tiny_book(
    tmp_path: Path, markdown: str, glued: dict[str, str]
) -> tuple[Path, Path]:
    """A one-chapter book whose chapter's Markdown is ``markdown``, and its build folder
    with the executed chapter's glue (name -> text/plain) as myst-nb leaves it."""
    root, build = tmp_path / "root", tmp_path / "_build"
    (root / "book" / "images").mkdir(parents=True)
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: One\n    numbered: true\n"
        "    chapters:\n      - file: book/01_one\n"
    )
    (root / "book" / "intro.md").write_text("# Intro\n")
    (root / "book" / "images" / "fig.png").write_bytes(b"png")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(f"# One\n\n{markdown}")]
    (root / "book" / "01_one.ipynb").write_text(nbformat.writes(notebook))
    executed = build / reader.EXECUTED / "book" / "01_one.ipynb"
    executed.parent.mkdir(parents=True)
    executed.write_text(nbformat.writes(notebook))
    bundles = {k: {"data": {"text/plain": v}} for k, v in glued.items()}
    executed.with_suffix(".glue.json").write_text(json.dumps(bundles))
    return root, build


def _reader_main(root: Path, build: Path, capsys) -> tuple[int, str]:
    status = reader.main([str(build), "--root", str(root)])
    return status, capsys.readouterr().err


def test_an_image_path_that_leaves_book_is_refused(tmp_path: Path, capsys) -> None:
    """``../`` in a chapter's image used to copy a file from outside book/ into the
    published HTML; now the build stops, naming the chapter and the image."""
    root, build = _tiny_book(tmp_path, "![ok](images/fig.png)", {})
    assert _reader_main(root, build, capsys)[0] == 0
    assert (build / "html" / "notebooks" / "images" / "fig.png").read_bytes() == b"png"
    (root / "secret.txt").write_text("private")
    for image in ("../secret.txt", "images/../../secret.txt"):
        root, build = _tiny_book(tmp_path / str(len(image)), f"![x]({image})", {})
        (root / "secret.txt").write_text("private")
        status, err = _reader_main(root, build, capsys)
        assert status == 1 and len(err.splitlines()) == 1
        assert err.startswith(f"error: chapter 01_one: the image {image!r} is outside")
        assert not list((build / "html").rglob("secret.txt"))


def test_a_glued_value_holding_html_is_escaped(tmp_path: Path, capsys) -> None:
    """The HTML book shows a glued value as text; the reader notebook no longer pastes it
    as live HTML."""
    markdown = "Value: {glue:text}`x` and {glue}`y`."
    hostile = '<img src=x onerror="alert(1)">'
    root, build = _tiny_book(tmp_path, markdown, {"x": hostile, "y": "<b>&</b>"})
    assert _reader_main(root, build, capsys)[0] == 0
    notebook = json.loads((build / "notebooks" / "01_one.ipynb").read_text())
    text = "".join(
        c["source"] for c in notebook["cells"] if c["cell_type"] == "markdown"
    )
    assert "<img" not in text and "<b>" not in text
    assert '&lt;img src=x onerror="alert(1)"&gt;' in text
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in text


_DAMAGE = {
    "toc not yaml": ("_toc.yml", "root: [unclosed\n  - :"),
    "toc nested deep": (
        "_toc.yml",
        "root: book/intro\nparts: " + "[" * 5000 + "]" * 5000,
    ),
    "toc yaml bomb": (
        "_toc.yml",
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi")
        )
        + "root: book/intro\n",
    ),
    "toc a list": ("_toc.yml", "- book/intro\n"),
    "toc leaves the book": (
        "_toc.yml",
        "root: book/intro\nchapters:\n  - file: ../x\n",
    ),
    "glue not json": ("glue", "{not json"),
    "glue nested deep": ("glue", "[" * 100000 + "]" * 100000),
    "glue a list": ("glue", "[1, 2]"),
    "glue bundle damaged": ("glue", '{"x": {"data": {"text/plain": 5}}}'),
    "executed not json": ("executed", "\x00\xff garbage"),
    "executed cells damaged": ("executed", '{"cells": [1, 2]}'),
    "bibliography damaged": ("bib", "@article{x, title = {unclosed"),
    "executed outputs damaged": (
        "executed",
        '{"cells": [{"cell_type": "code", "source": "", "outputs": 3}]}',
    ),
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_build_file_or_toc_gives_one_clear_error(
    tmp_path: Path, damage: str, capsys
) -> None:
    """No traceback, RecursionError or MemoryError: one ``error:`` line naming the file."""
    root, build = _tiny_book(tmp_path, "Value {glue:text}`x`.", {"x": "1"})
    assert _reader_main(root, build, capsys)[0] == 0
    which, text = _DAMAGE[damage]
    executed = build / reader.EXECUTED / "book" / "01_one.ipynb"
    path = {
        "_toc.yml": root / "_toc.yml",
        "glue": executed.with_suffix(".glue.json"),
        "executed": executed,
        "bib": root / "book" / "references.bib",
    }[which]
    path.write_text(text)
    with _within(20):
        status, err = _reader_main(root, build, capsys)
    assert status == 1
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert path.name in err
