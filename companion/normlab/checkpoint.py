"""Resumable checkpoints of :func:`normlab.training.fit`: one file, ``last.pt``, per run.

A checkpoint holds everything an exact resume needs: the model, optimiser and scheduler
states, every RNG state (torch, CUDA, the loop's shuffling generator, Python, NumPy), each
callback's ``state_dict``, the history so far and the loop's counters. It also holds what
makes a resume safe: the model's :func:`model_signature` and the run's compatibility record
(:meth:`normlab.training.FitConfig.run_record`); a resume with another model or other
settings raises :class:`CheckpointError` instead of silently mixing two runs.

Files are written atomically (:func:`normlab._io.write_atomic`), so a run killed while
saving leaves the previous checkpoint intact. A file is a two-line header, ``normlab
checkpoint <format>`` and ``sha256 <hex digest>``, then the ``torch.save`` bytes of the state;
the digest is of those bytes, so a checkpoint damaged or altered after saving (one flipped
byte) is refused, naming the file, instead of resuming with other numbers. So is one that
lacks any of :data:`REQUIRED_KEYS`. Everything is stored as tensors and plain types, so
loading uses ``torch.load(weights_only=True)``; :func:`load` reads a checkpoint's state.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ._io import write_atomic
from .callbacks import Callback, TrainState

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_NAME",
    "CheckpointError",
    "MAX_CHECKPOINT_BYTES",
    "REQUIRED_KEYS",
    "load",
    "read",
    "model_signature",
    "resume",
    "save",
]

CHECKPOINT_NAME = "last.pt"
#: 2: a header with the SHA-256 digest of the state, then ``torch.save``'s bytes; 1 (a bare
#: ``torch.save`` file, without a digest) is no longer read.
CHECKPOINT_FORMAT = 2
#: What every checkpoint holds (``rng`` with ``torch``, ``cuda``, ``shuffle``, ``python`` and
#: ``numpy``); :func:`resume` reads them all.
REQUIRED_KEYS: tuple[str, ...] = (
    "format",
    "signature",
    "run_config",
    "model",
    "optimizer",
    "scheduler",
    "rng",
    "callbacks",
    "history",
    "epoch",
    "step",
    "stopped",
)
_RNG_KEYS: tuple[str, ...] = ("torch", "cuda", "shuffle", "python", "numpy")
#: The largest checkpoint :func:`load` reads (the book's models' are a few MB; a paper-profile
#: ViT's with its Adam state some hundreds): a larger file is refused before it is read.
MAX_CHECKPOINT_BYTES = 4 << 30
#: The type of each of :data:`REQUIRED_KEYS`, checked before a resume uses any of them.
_TYPES: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "signature": list,
    "run_config": dict,
    "model": dict,
    "optimizer": dict,
    "scheduler": dict,
    "rng": dict,
    "callbacks": list,
    "history": list,
    "epoch": int,
    "step": int,
    "stopped": bool,
}
# O_NOFOLLOW: no link is followed; O_NONBLOCK: a named pipe does not block the open.
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_MAGIC = b"normlab checkpoint "


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used: unreadable, or written by another model or run."""


def model_signature(model: nn.Module) -> list[list[Any]]:
    """``[name, shape]`` of every entry of the model's state dict (shape None for a module's
    extra state, such as a gate's freeze flag): what a checkpoint must match."""
    return [
        [name, list(t.shape) if isinstance(t, torch.Tensor) else None]
        for name, t in model.state_dict().items()
    ]


def save(
    path: Path,
    state: TrainState,
    *,
    run_record: Mapping[str, Any],
    generator: torch.Generator,
    callbacks: Sequence[Callback],
) -> None:
    """Write the loop's state after epoch ``state.epoch`` to ``path``, atomically."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "signature": model_signature(state.model),
        "run_config": dict(run_record),
        "model": state.model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "rng": _rng_state(generator),
        "callbacks": [
            [type(callback).__name__, callback.state_dict()] for callback in callbacks
        ],
        "history": [dict(record) for record in state.history],
        "epoch": state.epoch,
        "step": state.step,
        "stopped": bool(state.stop_training),
    }
    _write(path, payload)


def _write(path: Path, payload: Mapping[str, Any]) -> None:
    """The header with the digest of ``torch.save(payload)``'s bytes, then those bytes."""
    buffer = io.BytesIO()
    torch.save(dict(payload), buffer)
    body = buffer.getvalue()
    header = b"%s%d\nsha256 %s\n" % (
        _MAGIC,
        CHECKPOINT_FORMAT,
        hashlib.sha256(body).hexdigest().encode(),
    )
    # header and body in one file, renamed into place: never a digest beside another
    # state, as a separate digest file would be after a kill between the two renames
    write_atomic(path, lambda f: (f.write(header), f.write(body)))


def resume(
    path: Path,
    state: TrainState,
    *,
    run_record: Mapping[str, Any],
    generator: torch.Generator,
    callbacks: Sequence[Callback],
) -> bool:
    """Restore the loop's state from ``path`` if it exists; say whether it did.

    The model, optimiser and scheduler in ``state`` must already be built. On resume each
    callback gets the saved state of the first unused callback of the same class; a callback
    without one starts fresh.

    Raises:
        CheckpointError: the file is unreadable, damaged or altered since it was saved (its
            digest differs), lacks a required key, or was written by another model or by a
            run whose record differs from ``run_record``.
    """
    if not os.path.lexists(path):
        return False
    payload = load(path)
    _check_compatible(payload, path, model_signature(state.model), run_record)
    state.model.load_state_dict(payload["model"])
    state.optimizer.load_state_dict(payload["optimizer"])
    state.scheduler.load_state_dict(payload["scheduler"])
    _restore_callbacks(callbacks, payload["callbacks"])
    state.history.extend(payload["history"])
    state.epoch, state.step, state.stop_training = (
        payload["epoch"],
        payload["step"],
        payload["stopped"],
    )
    _set_rng_state(payload["rng"], generator)
    return True


def _rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Every RNG state as tensors and primitives (``weights_only``-loadable)."""
    py_version, py_state, py_gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "shuffle": generator.get_state(),
        "python": {
            "version": py_version,
            "state": torch.tensor(py_state, dtype=torch.int64),
            "gauss": py_gauss,
        },
        "numpy": {
            "kind": np_kind,
            "keys": torch.from_numpy(np_keys.astype(np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "gauss": float(np_gauss),
        },
    }


def _set_rng_state(state: Mapping[str, Any], generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    generator.set_state(state["shuffle"])
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state(
        (
            npy["kind"],
            npy["keys"].numpy().astype(np.uint32),
            npy["pos"],
            npy["has_gauss"],
            npy["gauss"],
        )
    )


def _refuse(path: Path, why: str) -> CheckpointError:
    return CheckpointError(
        f"{path} is not a checkpoint of this package ({why}); delete it, or its folder "
        f"{path.parent}, to start the run afresh"
    )


def _read(path: Path) -> bytes:
    """The bytes of ``path``, a regular file (not a link, pipe or device) of at most
    :data:`MAX_CHECKPOINT_BYTES`, by a bounded read: no file can hang or exhaust memory."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as err:
        why = "it is a symbolic link" if os.path.islink(path) else err.strerror or err
        raise _refuse(path, f"it cannot be read: {why}") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(
                path, "it is not a regular file (a pipe, a device or a folder)"
            )
        if info.st_size > MAX_CHECKPOINT_BYTES:
            raise _refuse(path, f"it is larger than {MAX_CHECKPOINT_BYTES >> 30} GiB")
        chunks, left = [], MAX_CHECKPOINT_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 24))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise _refuse(path, f"it cannot be read: {err.strerror or err}") from err
    finally:
        os.close(fd)
    if left <= 0:
        raise _refuse(
            path, f"it grew past {MAX_CHECKPOINT_BYTES >> 30} GiB as it was read"
        )
    return b"".join(chunks)


def _pairs(value: Any, first: type, second: tuple[type, ...]) -> bool:
    """Whether ``value`` is a list of ``[first, second]`` pairs."""
    return isinstance(value, list) and all(
        isinstance(p, (list, tuple))
        and len(p) == 2
        and isinstance(p[0], first)
        and isinstance(p[1], second)
        for p in value
    )


def _wrong_types(payload: dict[Any, Any]) -> list[str]:
    """The keys of ``payload`` whose values are not of their :data:`_TYPES`."""
    wrong = [
        k
        for k, kind in _TYPES.items()
        if not isinstance(payload[k], kind)
        or (kind is int and isinstance(payload[k], bool))
    ]
    if "signature" not in wrong and not _pairs(
        payload["signature"], str, (list, type(None))
    ):
        wrong.append("signature (not [name, shape] pairs)")
    if "callbacks" not in wrong and not _pairs(payload["callbacks"], str, (dict,)):
        wrong.append("callbacks (not [name, state] pairs)")
    history = payload["history"]
    if "history" not in wrong and not all(isinstance(h, dict) for h in history):
        wrong.append("history (not a list of dicts)")
    return wrong


def read(path: str | Path) -> dict[str, Any]:
    """The payload of a checkpoint file at ``path`` once its header and digest are checked
    (:func:`load` then checks a :func:`~normlab.training.fit` checkpoint's keys; a
    population's, :mod:`normlab.population`, has its own)."""
    path = Path(path)
    blob = _read(path)
    first, _, rest = blob.partition(b"\n")
    second, _, body = rest.partition(b"\n")
    if first != b"%s%d" % (_MAGIC, CHECKPOINT_FORMAT) or not second.startswith(
        b"sha256 "
    ):
        raise _refuse(
            path,
            f"no format-{CHECKPOINT_FORMAT} header with a SHA-256 digest: damaged, truncated, "
            "written by another program or by an older normlab",
        )
    recorded = second.removeprefix(b"sha256 ").decode("ascii", "replace")
    actual = hashlib.sha256(body).hexdigest()
    if actual != recorded:
        raise _refuse(
            path,
            f"damaged or altered since it was saved: its SHA-256 digest is {actual}, "
            f"not the {recorded!r} saved with it",
        )
    try:
        payload = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a damaged file
        # torch's own message may suggest weights_only=False: never right for a file that
        # is damaged or foreign, and unsafe, so only the error's type is shown.
        raise _refuse(
            path,
            f"torch.load with weights_only=True raised {type(err).__name__}",
        ) from err
    if not isinstance(payload, dict):
        raise _refuse(path, f"it holds a {type(payload).__name__}, not a dict")
    return payload


def load(path: str | Path) -> dict[str, Any]:
    """The state saved in checkpoint ``path``, once its digest and keys are checked.

    Raises:
        CheckpointError: naming ``path``, when it is not a regular file within
            :data:`MAX_CHECKPOINT_BYTES` (a link, a pipe, a device), cannot be read, has no normlab checkpoint
            header (damaged, truncated, written by another program or by normlab before
            format 2), holds bytes whose SHA-256 differs from the digest saved with them, or
            lacks any of :data:`REQUIRED_KEYS` or holds one of another type.
    """
    path = Path(path)
    payload = read(path)
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    rng = payload.get("rng")
    if isinstance(rng, dict):
        missing += [f"rng.{k}" for k in _RNG_KEYS if k not in rng]
    elif "rng" not in missing:
        missing.append("rng (not a dict)")
    if missing:
        raise _refuse(path, f"it lacks {', '.join(missing)}")
    wrong = _wrong_types(payload)
    if wrong:
        raise _refuse(path, f"wrong type for {', '.join(wrong)}")
    if payload["format"] != CHECKPOINT_FORMAT:
        raise _refuse(
            path,
            f"format {payload['format']!r} in a format-{CHECKPOINT_FORMAT} header",
        )
    return payload


def _check_compatible(
    payload: Mapping[str, Any],
    path: Path,
    signature: list[list[Any]],
    run_record: Mapping[str, Any],
) -> None:
    if payload["signature"] != signature:
        theirs = {name: shape for name, shape in payload["signature"]}
        ours = {name: shape for name, shape in signature}
        diff = sorted(
            k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k)
        )
        shown = ", ".join(
            f"{k}: checkpoint {theirs.get(k)} vs model {ours.get(k)}" for k in diff[:4]
        )
        raise CheckpointError(
            f"checkpoint {path} was written by another model ({len(diff)} parameter(s) differ: {shown}); "
            f"use another checkpoint_dir or delete it"
        )
    saved = payload["run_config"]
    diff = sorted(
        k for k in saved.keys() | run_record.keys() if saved.get(k) != run_record.get(k)
    )
    if diff:
        shown = ", ".join(
            f"{k}: checkpoint {saved.get(k)!r} vs now {run_record.get(k)!r}"
            for k in diff
        )
        raise CheckpointError(
            f"checkpoint {path} was written by a run with other settings ({shown}); "
            f"use another checkpoint_dir or delete it"
        )


def _restore_callbacks(callbacks: Sequence[Callback], saved: list[list[Any]]) -> None:
    """Give each callback the saved state of the same class, in order; others start fresh."""
    remaining = list(saved)
    for callback in callbacks:
        name = type(callback).__name__
        for i, (saved_name, state) in enumerate(remaining):
            if saved_name == name:
                callback.load_state_dict(state)
                del remaining[i]
                break
