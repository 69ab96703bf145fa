"""What chapters 6-8 share: the learnability and ceiling check, in words."""

from __future__ import annotations

import pandas as pd

from ..claims.rules import trained_margin
from ..figures import label

#: Above this accuracy a comparison of normalisers reads the ceiling, not the methods.
CEILING = 0.97


def band_words(scores: pd.Series, chance: float | None, where: str = "") -> str:
    """Whether every arm (``scores``: mean test accuracy per normaliser at its chosen rate)
    learned (chance + the learnability margin) and stays under :data:`CEILING`, in words
    with at most two numbers; ``where`` opens the sentence (e.g. "At the chosen rates")."""
    floor = -1.0 if chance is None else chance + trained_margin(chance)
    outside = scores[(scores < floor) | (scores > CEILING)]
    if outside.empty:
        opening = f"{where}, every" if where else "Every"
        return (
            f"{opening} arm learned and none reads the ceiling: mean test accuracies run "
            f"from {scores.min():.3f} to {scores.max():.3f}."
        )
    names = ", ".join(label(n) for n in outside.index)
    return f"Outside the band from chance + 0.1 to {CEILING}: {names}."
