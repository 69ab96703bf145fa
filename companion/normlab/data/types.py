"""The one structure every loader returns and the training loop consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

__all__ = [
    "DataSplit",
    "IGNORE_INDEX",
    "LABEL_NAMES",
    "PAD_ID",
    "Task",
    "TASKS",
]

Task = Literal["classification", "tagging", "regression"]
TASKS: tuple[str, ...] = ("classification", "tagging", "regression")
PAD_ID = 0
IGNORE_INDEX = -100
# task -> the meta entry that names the label set, and what it holds
LABEL_NAMES: dict[str, str] = {"classification": "classes", "tagging": "tags"}


@dataclass
class DataSplit:
    """One split of one dataset, as tensors plus metadata.

    Shapes by task:

    - ``classification`` of images: ``x`` float ``(N, C, H, W)``, ``y`` long ``(N,)``.
    - ``classification`` of sentences: ``x`` long ``(N, L)`` token ids, padded with
      ``PAD_ID`` (0); ``y`` long ``(N,)``.
    - ``tagging``: ``x`` long ``(N, L)`` token ids padded with ``PAD_ID``; ``y`` long
      ``(N, L)`` tag ids, ``IGNORE_INDEX`` (-100) at padding.
    - ``regression``: ``x`` float ``(N, F)``; ``y`` float ``(N,)`` or ``(N, T)``.

    ``meta`` holds what the task needs: ``classes``, ``vocab``, ``tags``,
    ``feature_names``, ``target_names``, ``target_scale`` (to report RMSE in the original
    units), ``source`` and ``stand_in`` (True for the quick-profile stand-ins).
    ``meta["row_keys"]`` names the meta entries that hold one value per row (tensors of
    length N, e.g. CIFAR-10-C's ``corruption_index`` and ``severity``); :meth:`subset`
    slices them with the rows.

    The constructor checks what a split can check about itself: the dtypes and shapes of
    its task, ``meta["classes"]`` (classification) or ``meta["tags"]`` (tagging), every
    label inside ``[0, num_classes)``, and ``IGNORE_INDEX`` at every padded token
    (tagging). A wrong dtype raises a ``TypeError``, anything else a ``ValueError`` naming
    the split. An empty split is allowed (a filter may select no rows);
    :func:`normlab.training.fit` and :func:`~normlab.training.evaluate` refuse one.
    """

    x: torch.Tensor
    y: torch.Tensor
    task: Task
    name: str
    split: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(
                f"task={self.task!r} is not a task; expected one of {', '.join(TASKS)}"
            )
        for key in ("x", "y"):
            if not isinstance(getattr(self, key), torch.Tensor):
                raise TypeError(
                    f"{key} of split {self.title} must be a torch.Tensor, got {type(getattr(self, key)).__name__}"
                )
        if len(self.x) != len(self.y):
            raise ValueError(
                f"x and y disagree in length: {len(self.x)} != {len(self.y)}"
            )
        self._check_dtypes()
        if self.task in LABEL_NAMES:
            self._check_labels()

    @property
    def title(self) -> str:
        """``"<name>/<split>"``, how messages name the split."""
        return f"{self.name}/{self.split}"

    def _check_dtypes(self) -> None:
        x, y = self.x, self.y
        long_x = x.dtype == torch.long
        if self.task == "regression":
            expected = {
                "x": (x.is_floating_point(), "a floating dtype"),
                "y": (y.is_floating_point(), "a floating dtype"),
            }
        else:
            expected = {
                "x": (
                    x.is_floating_point() or long_x
                    if self.task == "classification"
                    else long_x,
                    "a floating dtype (features) or torch.int64 (token ids)"
                    if self.task == "classification"
                    else "torch.int64 (token ids)",
                ),
                "y": (
                    y.dtype == torch.long,
                    f"torch.int64 (long) {LABEL_NAMES[self.task]} indices; convert with y.long()",
                ),
            }
        for key, (ok, what) in expected.items():
            if not ok:
                raise TypeError(
                    f"{key} of {self.task} split {self.title} must be {what}, got {getattr(self, key).dtype}"
                )
        if self.task == "classification" and y.ndim != 1:
            raise ValueError(
                f"y of classification split {self.title} must have shape (N,), got {tuple(y.shape)}"
            )
        if self.task == "tagging" and (x.ndim != 2 or y.shape != x.shape):
            raise ValueError(
                f"tagging split {self.title} needs x and y of one shape (N, L), "
                f"got x {tuple(x.shape)} and y {tuple(y.shape)}"
            )
        if self.task == "regression" and y.ndim not in (1, 2):
            raise ValueError(
                f"y of regression split {self.title} must have shape (N,) or (N, T), got {tuple(y.shape)}"
            )

    def _check_labels(self) -> None:
        key = LABEL_NAMES[self.task]
        if key not in self.meta:
            raise ValueError(
                f"{self.task} split {self.title} needs meta[{key!r}], the list of {key} names; it has none"
            )
        n = len(self.meta[key])
        invalid = (self.y < 0) | (self.y >= n)
        if self.task == "tagging":
            invalid &= self.y != IGNORE_INDEX
        if invalid.any():
            values, counts = self.y[invalid].unique(return_counts=True)
            shown = ", ".join(
                f"{v} ({c} {'entry' if c == 1 else 'entries'})"
                for v, c in zip(values.tolist()[:5], counts.tolist())
            )
            more = f" and {len(values) - 5} other values" if len(values) > 5 else ""
            ignore = (
                f" or IGNORE_INDEX ({IGNORE_INDEX})" if self.task == "tagging" else ""
            )
            raise ValueError(
                f"split {self.title} has labels outside the valid range [0, {n}) of its {n} {key}{ignore}: "
                f"{shown}{more}"
            )
        if self.task == "tagging":
            tagged_padding = (self.x == PAD_ID) & (self.y != IGNORE_INDEX)
            if tagged_padding.any():
                row = int(tagged_padding.any(1).nonzero()[0])
                raise ValueError(
                    f"tagging split {self.title} tags {int(tagged_padding.sum())} padding token(s) "
                    f"(x == PAD_ID, {PAD_ID}), first in row {row}; y must be IGNORE_INDEX "
                    f"({IGNORE_INDEX}) there"
                )

    def __len__(self) -> int:
        return len(self.x)

    @property
    def num_classes(self) -> int | None:
        """Number of classes (classification) or tags (tagging); None for regression."""
        return (
            len(self.meta[LABEL_NAMES[self.task]]) if self.task in LABEL_NAMES else None
        )

    def to(self, device: torch.device | str) -> DataSplit:
        """Return the same split with its tensors on ``device``."""
        return DataSplit(
            self.x.to(device),
            self.y.to(device),
            self.task,
            self.name,
            self.split,
            self.meta,
        )

    def subset(self, index: torch.Tensor | slice) -> DataSplit:
        """Return the rows at ``index`` (a slice, index tensor or boolean mask)."""
        meta = dict(self.meta)
        for key in meta.get("row_keys", ()):
            meta[key] = meta[key][index]
        return DataSplit(
            self.x[index], self.y[index], self.task, self.name, self.split, meta
        )
