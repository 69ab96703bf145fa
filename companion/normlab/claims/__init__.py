"""Every claim of the two papers as data, each with the test that settles it.

- :mod:`~normlab.claims.rules`: how an interval across seeds becomes a verdict (of sign
  alone where it reaches across the margin), how a claim's effects combine (each named
  where they differ), and the learnability and ceiling rules that come first;
- :mod:`~normlab.claims.registry`: :class:`Claim`, :class:`Test`, :class:`Measurement`,
  :class:`Effect` and the table :data:`CLAIMS`, filled by :func:`declare`;
- :mod:`~normlab.claims.pairing`: the one paired comparison every rule and chapter uses;
- :mod:`~normlab.claims.part1`, :mod:`~normlab.claims.part2`: the declarations of each
  part, whose tests read the exact measurements (:mod:`~normlab.claims.exact`) and the
  quantities of Part I's comparisons of normalisers and of batch sizes
  (:mod:`~normlab.claims.part1_comparisons`, :mod:`~normlab.claims.part1_batch`) and of
  Part II's gate and task studies (:mod:`~normlab.claims.part2_gates`,
  :mod:`~normlab.claims.part2_tasks`);
- :mod:`~normlab.claims.plans`: each empirical claim's plan: estimand, primary
  specification, margin (the smallest effect that matters, tied to the paper's number) and
  the seeds a pilot spread says it needs;
- :mod:`~normlab.claims.robust`: the verdict at a close runner-up rate and under each
  declared specification;
- :mod:`~normlab.claims.judging`: :func:`evaluate` and :func:`judge`, a claim's outcome;
- :mod:`~normlab.claims.records`: the scorecard, also as JSON records;
- :mod:`~normlab.claims.rendering`: the chapters' verdict tables and Markdown.

To attach a test to a claim, edit its one declaration (``test=Test(...)``) in its part's
module.
"""

from __future__ import annotations

from . import part1, part2, plans  # noqa: F401  (their declarations fill CLAIMS)
from .judging import (
    Judged,
    Outcome,
    chapter_notebook,
    evaluate,
    judge,
    specification_curve,
    tested_on,
)
from .pairing import at_chosen_lr, chance_level, paired, source_of, test_items
from .plans import PLANS, Margin, Plan, margin_for, plan, specification
from .records import scorecard, scorecard_records
from .registry import (
    CLAIMS,
    Arm,
    Check,
    Claim,
    Effect,
    Measurement,
    Test,
    Unmeasurable,
    declare,
    get,
    ids,
)
from .rendering import (
    chapter_link,
    kind_counts,
    markdown,
    part_markdown,
    plan_table,
    reading_table,
    reproducibility_markdown,
    reproducibility_table,
    verdict_table,
)
from .rules import (
    AT_CEILING,
    CONCEPTUAL,
    CONSISTENT,
    CONTRADICTED,
    DECIDED,
    INCONCLUSIVE,
    MIXED,
    NEGLIGIBLE,
    NOT_TRAINED,
    NOT_YET_TESTED,
    SIGN_CONTRADICTED,
    SIGN_SUPPORTED,
    SIZE_DECIDED,
    SUPPORTED,
    VERDICTS,
    AtLeast,
    ConsistentWith,
    Directional,
    Equivalent,
    combine,
    holm_intervals,
    size_decided,
    verdict_words,
)

__all__ = [
    "specification_curve",
    "SUPPORTED",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "CONSISTENT",
    "NEGLIGIBLE",
    "SIGN_SUPPORTED",
    "SIGN_CONTRADICTED",
    "MIXED",
    "AT_CEILING",
    "CONCEPTUAL",
    "DECIDED",
    "SIZE_DECIDED",
    "size_decided",
    "verdict_words",
    "NOT_TRAINED",
    "NOT_YET_TESTED",
    "VERDICTS",
    "Directional",
    "Equivalent",
    "AtLeast",
    "ConsistentWith",
    "combine",
    "holm_intervals",
    "Arm",
    "Effect",
    "Check",
    "Measurement",
    "Test",
    "Claim",
    "Outcome",
    "Judged",
    "Unmeasurable",
    "CLAIMS",
    "declare",
    "get",
    "ids",
    "at_chosen_lr",
    "chance_level",
    "source_of",
    "paired",
    "test_items",
    "plans",
    "Plan",
    "Margin",
    "PLANS",
    "plan",
    "margin_for",
    "specification",
    "judge",
    "evaluate",
    "tested_on",
    "scorecard",
    "scorecard_records",
    "reproducibility_markdown",
    "reproducibility_table",
    "reading_table",
    "kind_counts",
    "plan_table",
    "verdict_table",
    "markdown",
    "chapter_notebook",
    "chapter_link",
    "part_markdown",
]
