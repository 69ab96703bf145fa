"""normlab.training: learning, exact determinism and resume, checkpoints, errors, tasks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import normlab
import pytest
import torch
from normlab import checkpoint
from normlab.augment import Augment, cutmix, mixup, random_crop, random_hflip
from normlab.callbacks import Callback, TrainState
from normlab.data import DataSplit, load
from normlab.models import MLP
from normlab.training import CheckpointError, History, _schedule, evaluate, fit
from torch import nn

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def digits() -> tuple[DataSplit, DataSplit, DataSplit]:
    return load("digits", "train"), load("digits", "val"), load("digits", "test")


def small_model(seed: int = 0) -> nn.Module:
    """Dropout (global RNG), BatchNorm (buffers) and two linear layers: all resume paths."""
    normlab.seed_everything(seed)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 32),
        nn.BatchNorm1d(32),
        nn.Tanh(),
        nn.Dropout(0.2),
        nn.Linear(32, 10),
    )


# Shuffling, augmentation, dropout, AdamW state, a warm-up schedule and weight decay.
RESUME_KWARGS = dict(
    epochs=4,
    batch_size=64,
    lr=0.01,
    optimizer="adamw",
    weight_decay=0.01,
    schedule="warmup_cosine",
    warmup=0.2,
    augment=Augment(crop_padding=1, hflip=True),
    device="cpu",
    progress=False,
    seed=3,
)


class StepCounter(Callback):
    """A stateful callback: its count must survive a resume."""

    def __init__(self) -> None:
        self.steps = 0
        self.seen_at_epoch_end: list[int] = []

    def on_step_end(self, state: TrainState) -> None:
        self.steps += 1

    def on_epoch_end(self, state: TrainState) -> None:
        self.seen_at_epoch_end.append(self.steps)
        state.history[-1]["callback_steps"] = self.steps

    def state_dict(self) -> dict:
        return {"steps": self.steps, "seen": list(self.seen_at_epoch_end)}

    def load_state_dict(self, state: dict) -> None:
        self.steps, self.seen_at_epoch_end = state["steps"], list(state["seen"])


class Crash(Callback):
    """Raises once the loop reaches optimiser step ``at``: an interruption anywhere."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, state: TrainState) -> None:
        if state.step == self.at:
            raise KeyboardInterrupt(f"simulated interruption at step {self.at}")


def params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_digits_beats_chance(digits) -> None:
    """Chance is 0.1 on 10 balanced classes; a small MLP must reach >= 0.85 in 10 epochs."""
    train, val, test = digits
    normlab.seed_everything(0)
    model = MLP(in_features=64, num_classes=10, width=64, depth=2)
    history = fit(
        model,
        train,
        val,
        epochs=10,
        batch_size=32,
        lr=0.1,
        optimizer="sgd",
        device="cpu",
        progress=False,
    )
    assert isinstance(history, History) and len(history) == 10
    assert history.metric == "accuracy" and history.higher_is_better
    assert history.val_metric[-1] >= 0.85
    assert evaluate(model, test)["accuracy"] >= 0.85
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert all(r["samples_per_s"] > 0 and r["epoch_time_s"] > 0 for r in history)
    assert history.column("step") == [
        39 * e for e in range(1, 11)
    ]  # 1257 // 32 = 39 steps an epoch


def test_same_seed_same_numbers(digits) -> None:
    train, val, _ = digits
    runs = []
    for seed in (3, 3, 4):
        model = small_model(seed)
        kwargs = {**RESUME_KWARGS, "seed": seed}
        runs.append((fit(model, train, val, **kwargs).without_timing(), params(model)))
    (h1, p1), (h2, p2), (h3, _) = runs
    assert h1 == h2
    assert all(torch.equal(p1[k], p2[k]) for k in p1)
    assert h1 != h3


def test_resume_in_process_is_exact(digits, tmp_path: Path) -> None:
    """Interrupt at several points (mid-epoch, on an epoch's last step, in the last epoch)."""
    train, val, _ = digits
    counter = StepCounter()
    model = small_model()
    reference = fit(
        model, train, val, callbacks=[counter], **RESUME_KWARGS
    ).without_timing()
    reference_params = params(model)
    steps_per_epoch = len(train) // RESUME_KWARGS["batch_size"]
    for crash_at in (
        5,
        steps_per_epoch,
        2 * steps_per_epoch + 7,
        4 * steps_per_epoch - 1,
    ):
        folder = tmp_path / f"crash{crash_at}"
        with pytest.raises(KeyboardInterrupt):
            fit(
                small_model(),
                train,
                val,
                callbacks=[StepCounter(), Crash(crash_at)],
                **RESUME_KWARGS,
                checkpoint_dir=folder,
            )
        resumed_counter = StepCounter()
        # A crash before the first checkpoint restarts from scratch (same initial weights);
        # after it, start from other weights: the checkpoint must overwrite them.
        model = small_model(seed=99 if (folder / "last.pt").exists() else 0)
        history = fit(
            model,
            train,
            val,
            callbacks=[resumed_counter, Crash(-1)],
            **RESUME_KWARGS,
            checkpoint_dir=folder,
        )
        assert history.without_timing() == reference, f"crash at step {crash_at}"
        assert all(
            torch.equal(reference_params[k], v) for k, v in params(model).items()
        )
        assert resumed_counter.steps == counter.steps


def test_rerun_of_finished_run_trains_nothing(digits, tmp_path: Path) -> None:
    train, val, _ = digits
    kwargs = {**RESUME_KWARGS, "epochs": 2}
    first = fit(
        small_model(),
        train,
        val,
        checkpoint_dir=tmp_path,
        callbacks=[StepCounter()],
        **kwargs,
    )
    counter = StepCounter()
    model = small_model(seed=5)
    again = fit(
        model, train, val, checkpoint_dir=tmp_path, callbacks=[counter], **kwargs
    )
    assert again == first  # timing included: the history comes from the checkpoint
    assert counter.steps == 2 * (
        len(train) // 64
    )  # restored from the checkpoint, none added
    assert again.column("callback_steps") == [counter.steps // 2, counter.steps]


JOB = """
import sys, time, torch
from torch import nn
import normlab
from normlab.callbacks import Callback
from normlab.data import load
from normlab.training import fit


class Slow(Callback):
    def __init__(self, pause):
        self.pause = pause  # seconds of sleep per epoch, so that a kill lands mid-run

    def on_epoch_end(self, state):
        time.sleep(self.pause)


def train(checkpoint_dir, pause=0.0):
    torch.set_num_threads(1)
    normlab.seed_everything(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.Tanh(), nn.Dropout(0.1), nn.Linear(32, 10))
    history = fit(model, load("digits", "train"), load("digits", "val"), epochs=12, batch_size=128, lr=0.05,
                  optimizer="sgd", optimizer_kwargs={"momentum": 0.9}, schedule="cosine", seed=1, device="cpu",
                  progress=False, checkpoint_dir=checkpoint_dir, callbacks=[Slow(pause)])
    return history, model


if __name__ == "__main__":
    train(sys.argv[1], float(sys.argv[2]))
"""


def test_resume_after_sigkill_is_exact(tmp_path: Path) -> None:
    """Kill a real training process with SIGKILL once a checkpoint exists, rerun, compare."""
    import importlib.util

    script = tmp_path / "trainjob.py"
    script.write_text(JOB)
    env = {**os.environ, "NORMLAB_PROGRESS": "0", "PYTHONPATH": str(ROOT / "companion")}
    folder = tmp_path / "ckpt"
    victim = subprocess.Popen(
        [sys.executable, str(script), str(folder), "0.4"], env=env
    )
    deadline = time.monotonic() + 60
    while not (folder / "last.pt").exists():
        assert victim.poll() is None, (
            "the training process ended before writing a checkpoint"
        )
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.5)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert victim.returncode == -signal.SIGKILL
    saved_epoch = checkpoint.load(folder / "last.pt")["epoch"]
    assert 1 <= saved_epoch < 12, "the kill must land mid-run"

    spec = importlib.util.spec_from_file_location("trainjob", script)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    threads = torch.get_num_threads()
    try:
        resumed, resumed_model = job.train(folder)  # the rerun, resuming the killed run
        reference, reference_model = job.train(None)  # uninterrupted, no checkpoints
    finally:
        torch.set_num_threads(threads)
    assert resumed[0]["epoch"] == 1 and len(resumed) == 12
    assert resumed.without_timing() == reference.without_timing()
    expected = reference_model.state_dict()
    assert all(
        torch.equal(v, expected[k]) for k, v in resumed_model.state_dict().items()
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"optimizer": "adamax"}, "optimizer"),
        ({"schedule": "step"}, "schedule"),
        ({"epochs": 0}, "epochs"),
        ({"epochs": 2.5}, "epochs"),
        ({"lr": -0.1}, "lr"),
        ({"lr": 0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 5000}, "batch_size"),
        ({"warmup": 1.0}, "warmup"),
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_arguments_name_themselves(digits, kwargs: dict, match: str) -> None:
    train, val, _ = digits
    settings = {"epochs": 1, "batch_size": 32, "lr": 0.1, "progress": False, **kwargs}
    with pytest.raises(ValueError, match=match):
        fit(small_model(), train, val, **settings)


def test_checkpoint_from_another_model_is_refused(digits, tmp_path: Path) -> None:
    train, val, _ = digits
    fit(
        small_model(),
        train,
        val,
        epochs=1,
        batch_size=64,
        lr=0.01,
        checkpoint_dir=tmp_path,
        progress=False,
    )
    other = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.Tanh(), nn.Linear(16, 10))
    with pytest.raises(CheckpointError, match="another model"):
        fit(
            other,
            train,
            val,
            epochs=1,
            batch_size=64,
            lr=0.01,
            checkpoint_dir=tmp_path,
            progress=False,
        )
    with pytest.raises(CheckpointError, match="other settings.*lr"):
        fit(
            small_model(),
            train,
            val,
            epochs=1,
            batch_size=64,
            lr=0.02,
            checkpoint_dir=tmp_path,
            progress=False,
        )


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupted_checkpoint_gives_a_clear_error(
    digits, tmp_path: Path, damage: str
) -> None:
    train, val, _ = digits
    kwargs = dict(
        epochs=1, batch_size=64, lr=0.01, checkpoint_dir=tmp_path, progress=False
    )
    fit(small_model(), train, val, **kwargs)
    path = tmp_path / "last.pt"
    blob = path.read_bytes()
    path.write_bytes(
        {
            "truncate": blob[: len(blob) // 2],
            "garbage": b"not a checkpoint" * 10,
            "empty": b"",
        }[damage]
    )
    with pytest.raises(
        CheckpointError,
        match=r"last\.pt is not a checkpoint of this package.*delete it",
    ):
        fit(small_model(), train, val, **kwargs)


def test_a_flipped_byte_is_refused_naming_the_file(digits, tmp_path: Path) -> None:
    """One bit of a saved weight changed: the run resumed with other numbers, silently;
    now the checkpoint's SHA-256 digest no longer matches and it is refused, by name."""
    train, val, _ = digits
    kwargs = dict(
        epochs=1, batch_size=64, lr=0.01, checkpoint_dir=tmp_path, progress=False
    )
    model = small_model()
    fit(model, train, val, **kwargs)
    path = tmp_path / "last.pt"
    blob = bytearray(path.read_bytes())
    weight = model[1].weight.detach().numpy().tobytes()
    at = blob.find(weight)
    assert at > 0  # the weight's bytes, as torch.save stores them
    blob[at + len(weight) // 2] ^= 0x04
    path.write_bytes(blob)
    with pytest.raises(
        CheckpointError,
        match=rf"^{re.escape(str(path))} is not a checkpoint of this package \(damaged or "
        r"altered since it was saved: its SHA-256 digest is [0-9a-f]{64}, not the",
    ):
        fit(small_model(), train, val, **kwargs)


@pytest.mark.parametrize("key", ["step", "history", "rng.shuffle"])
def test_a_checkpoint_without_a_key_is_refused_naming_it(
    digits, tmp_path: Path, key: str
) -> None:
    """A checkpoint with a valid digest that lacks a key (another version's, or written by
    hand): a CheckpointError naming the file and the key, not a KeyError traceback."""
    train, val, _ = digits
    kwargs = dict(
        epochs=1, batch_size=64, lr=0.01, checkpoint_dir=tmp_path, progress=False
    )
    fit(small_model(), train, val, **kwargs)
    path = tmp_path / "last.pt"
    payload = checkpoint.load(path)
    holder, name = (
        (payload["rng"], "shuffle") if key == "rng.shuffle" else (payload, key)
    )
    del holder[name]
    checkpoint._write(path, payload)
    with pytest.raises(
        CheckpointError, match=rf"^{re.escape(str(path))} .*lacks {key}\)"
    ):
        fit(small_model(), train, val, **kwargs)


def test_a_checkpoint_of_format_1_is_refused(digits, tmp_path: Path) -> None:
    """A bare torch.save file (format 1, no digest) cannot be vouched for."""
    train, val, _ = digits
    kwargs = dict(
        epochs=1, batch_size=64, lr=0.01, checkpoint_dir=tmp_path, progress=False
    )
    fit(small_model(), train, val, **kwargs)
    path = tmp_path / "last.pt"
    torch.save({**checkpoint.load(path), "format": 1}, path)
    with pytest.raises(
        CheckpointError, match="no format-2 header with a SHA-256 digest"
    ):
        fit(small_model(), train, val, **kwargs)


def test_frozen_parameters_do_not_move(digits) -> None:
    """requires_grad=False mid-run: momentum and weight decay must not move the weight."""
    train, val, _ = digits

    class FreezeFirst(Callback):
        def on_epoch_end(self, state: TrainState) -> None:
            if state.epoch == 1:
                state.model[1].weight.requires_grad_(False)
                self.frozen = state.model[1].weight.detach().clone()

    freeze = FreezeFirst()
    model = small_model()
    fit(
        model,
        train,
        val,
        epochs=3,
        batch_size=64,
        lr=0.05,
        optimizer="sgd",
        weight_decay=0.1,
        optimizer_kwargs={"momentum": 0.9},
        callbacks=[freeze],
        device="cpu",
        progress=False,
    )
    assert torch.equal(model[1].weight, freeze.frozen)


class StepLR(Callback):
    """Records the learning rate each optimiser step uses (read before ``opt.step()``)."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_after_backward(self, state: TrainState) -> None:
        self.lrs.append(state.optimizer.param_groups[0]["lr"])


def test_warmup_cosine_schedule_and_max_steps(digits) -> None:
    train, val, _ = digits
    spy = StepLR()
    history = fit(
        small_model(),
        train,
        val,
        epochs=2,
        batch_size=64,
        lr=0.5,
        optimizer="sgd",
        schedule="warmup_cosine",
        warmup=0.5,
        callbacks=[spy],
        progress=False,
        device="cpu",
    )
    # warm-up ends exactly at the end of epoch 1 (multiplier 1), the cosine reaches 0 at the end.
    assert history.column("lr") == [pytest.approx(0.5), pytest.approx(0.0, abs=1e-12)]
    # the first step trains at lr / warmup_steps (never 0); the last warm-up step at lr
    warmup_steps = history.column("step")[0]
    assert len(spy.lrs) == 2 * warmup_steps and warmup_steps > 1
    assert spy.lrs[0] == pytest.approx(0.5 / warmup_steps, rel=1e-12)
    assert spy.lrs[warmup_steps - 1] == pytest.approx(0.5, rel=1e-12)
    assert spy.lrs[warmup_steps] == pytest.approx(0.5, rel=1e-12)
    assert all(a < b for a, b in zip(spy.lrs[:warmup_steps], spy.lrs[1:warmup_steps]))
    capped = fit(
        small_model(),
        train,
        val,
        epochs=5,
        batch_size=64,
        lr=0.1,
        max_steps=25,
        progress=False,
    )
    assert capped.column("step") == [19, 25]


@pytest.mark.parametrize("warmup_steps", [1, 4, 10])
def test_warmup_multiplier_starts_at_one_over_warmup_and_reaches_one(
    warmup_steps: int,
) -> None:
    multiplier = _schedule("warmup_cosine", 20, warmup_steps)
    # step k of the warm-up (0-based) trains at (k + 1) / warmup_steps: never at lr 0
    assert multiplier(0) == pytest.approx(1 / warmup_steps, rel=1e-12)
    assert [multiplier(k) for k in range(warmup_steps)] == pytest.approx(
        [(k + 1) / warmup_steps for k in range(warmup_steps)], rel=1e-12
    )
    assert multiplier(warmup_steps - 1) == 1.0
    assert multiplier(warmup_steps) == 1.0  # the cosine starts at its top
    assert multiplier(20) == pytest.approx(0.0, abs=1e-12)


def test_regression_rmse_in_original_units() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(50, 3, generator=generator)
    y = torch.randn(50, 2, generator=generator)
    split = DataSplit(x, y, "regression", "toy", "test", {"target_scale": [2.0, 10.0]})
    model = nn.Linear(3, 2)
    scores = evaluate(model, split, batch_size=7)
    with torch.no_grad():
        err = model(x) - y
    assert scores["loss"] == pytest.approx(err.pow(2).mean().item(), rel=1e-6)
    expected = (err * torch.tensor([2.0, 10.0])).pow(2).mean().sqrt().item()
    assert scores["rmse"] == pytest.approx(expected, rel=1e-6)


def test_tagging_ignores_padding() -> None:
    class FixedLogits(nn.Module):
        def __init__(self, logits: torch.Tensor) -> None:
            super().__init__()
            self.logits = nn.Parameter(logits)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.logits[: len(x)]

    logits = torch.zeros(2, 3, 4)
    logits[0, 0, 1] = logits[0, 1, 2] = logits[0, 2, 3] = logits[1, 0, 0] = 5.0
    y = torch.tensor([[1, 0, -100], [0, -100, -100]])  # 3 real tokens, 2 right
    split = DataSplit(
        torch.ones(2, 3, dtype=torch.long),
        y,
        "tagging",
        "toy",
        "val",
        {"tags": list("abcd")},
    )
    scores = evaluate(FixedLogits(logits), split)
    assert scores["token_accuracy"] == pytest.approx(2 / 3)
    expected = nn.functional.cross_entropy(
        logits.reshape(-1, 4), y.reshape(-1), ignore_index=-100
    )
    assert scores["loss"] == pytest.approx(expected.item(), rel=1e-6)


def test_augmentations_are_crops_flips_and_mixes() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(16, 2, 6, 6, generator=generator)
    cropped = random_crop(x, 2, generator)
    padded = nn.functional.pad(x, (2, 2, 2, 2))
    for i in range(len(x)):  # every output is one 6x6 window of the padded image
        windows = [
            padded[i, :, a : a + 6, b : b + 6] for a in range(5) for b in range(5)
        ]
        assert any(torch.equal(cropped[i], w) for w in windows)
    flipped = random_hflip(x, generator)
    same = [torch.equal(flipped[i], x[i]) for i in range(16)]
    mirrored = [torch.equal(flipped[i], x[i].flip(-1)) for i in range(16)]
    assert all(s or m for s, m in zip(same, mirrored)) and any(mirrored) and any(same)
    y = torch.arange(16)
    mixed, partner, lam = mixup(x, y, 0.4, generator)
    assert 0 <= lam <= 1
    assert torch.allclose(
        mixed, lam * x + (1 - lam) * x[partner]
    )  # y == arange: partner labels are the permutation
    cut, partner, kept = cutmix(x, y, 1.0, generator)
    from_self = (cut == x).all(dim=1).float().mean().item()
    moved = partner != y
    assert from_self == pytest.approx(
        kept * 1.0 + (1 - kept) * (~moved).float().mean().item(), abs=1e-6
    )
    with pytest.raises(ValueError, match="crop_padding"):
        Augment(crop_padding=-1)


def test_progress_switch(monkeypatch, digits, capsys) -> None:
    from normlab.training import progress_default

    monkeypatch.setenv("NORMLAB_PROGRESS", "0")
    assert progress_default() is False
    monkeypatch.setenv("NORMLAB_PROGRESS", "1")
    assert progress_default() is True
    monkeypatch.delenv("NORMLAB_PROGRESS")
    assert progress_default() is False  # pytest captures stderr: not a TTY
    assert progress_default("cpu") is False
    assert progress_default("cuda") is True  # GPU runs are long: a bar by default
    train, val, _ = digits
    fit(small_model(), train, val, epochs=1, batch_size=256, lr=0.01, progress=True)
    assert "step" in capsys.readouterr().err  # the tqdm bar went to stderr


# ------------------------------------------------------------------- stop at a target


class ValRecorder(Callback):
    """The validation accuracy after every step, measured independently of TargetStop."""

    def __init__(self, val: DataSplit) -> None:
        self.val, self.accuracy = val, {}

    def on_step_end(self, state: TrainState) -> None:
        self.accuracy[state.step] = evaluate(state.model, self.val)["accuracy"]


def _target_run(digits, target: float, every: int, **extra):
    from normlab.training import TargetStop

    train, val, _ = digits
    stop = TargetStop(val, target, every)
    kwargs = dict(epochs=3, batch_size=16, lr=0.3, device="cpu", progress=False, seed=1)
    history = fit(small_model(1), train, val, callbacks=[stop], **{**kwargs, **extra})
    return stop, history, kwargs


def test_target_stop_fires_at_the_first_measured_step_at_the_target(digits) -> None:
    """The run ends at the first step, of those measured (every 5th), whose validation
    accuracy reaches the target: the step that an unstopped run of the same seed shows."""
    train, val, _ = digits
    stop, history, kwargs = _target_run(digits, 0.8, every=5)
    recorder = ValRecorder(val)
    fit(small_model(1), train, val, callbacks=[recorder], **kwargs)
    expected = min(
        s for s, acc in recorder.accuracy.items() if s % 5 == 0 and acc >= 0.8
    )
    assert stop.reached_at == expected
    # training ended there: the cut-short epoch is recorded, and no step came after it
    assert history[-1]["step"] == expected and history[-1]["val_accuracy"] >= 0.8
    assert expected < 3 * (len(train) // 16)


def test_a_target_never_reached_is_censored(digits) -> None:
    """An unreachable target: the run goes to its cap, ``reached_at`` stays None."""
    train, _, _ = digits
    stop, history, _ = _target_run(digits, 1.5, every=3, max_steps=40)
    assert stop.reached_at is None and history[-1]["step"] == 40
    with pytest.raises(ValueError, match="every"):
        from normlab.training import TargetStop

        TargetStop(digits[1], 0.9, 0)
