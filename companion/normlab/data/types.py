"""The one structure every loader returns and the training loop consumes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

Task = Literal["classification", "tagging", "regression"]
TASKS: tuple[str, ...] = ("classification", "tagging", "regression")
PAD_ID = 0
IGNORE_INDEX = -100


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
    """

    x: torch.Tensor
    y: torch.Tensor
    task: Task
    name: str
    split: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} is not a task; expected one of {', '.join(TASKS)}")
        if len(self.x) != len(self.y):
            raise ValueError(f"x and y disagree in length: {len(self.x)} != {len(self.y)}")

    def __len__(self) -> int:
        return len(self.x)

    @property
    def num_classes(self) -> int | None:
        """Number of classes (classification) or tags (tagging); None for regression."""
        if self.task == "classification":
            return len(self.meta["classes"])
        if self.task == "tagging":
            return len(self.meta["tags"])
        return None

    def to(self, device: torch.device | str) -> "DataSplit":
        """Return the same split with its tensors on ``device``."""
        return DataSplit(self.x.to(device), self.y.to(device), self.task, self.name, self.split, self.meta)

    def subset(self, index: torch.Tensor | slice) -> "DataSplit":
        """Return the rows at ``index`` (a slice, index tensor or boolean mask)."""
        meta = dict(self.meta)
        for key in meta.get("row_keys", ()):
            meta[key] = meta[key][index]
        return DataSplit(self.x[index], self.y[index], self.task, self.name, self.split, meta)
