"""The plan of every empirical claim: what it estimates, on what, and what size matters.

One :class:`Plan` per claim id in :data:`PLANS` (adding a claim's plan is one entry):

- ``estimand``: the quantity, in words;
- the primary specification: read from the experiment grid the claim's test runs
  (:func:`specification`: data, model, initialisation, optimiser, budget convention), with
  the grid axes that the claim's verdict fixes in ``primary``;
- ``margin``: the smallest effect that matters, in the effect's ``units``, and ``tie``, the
  reason for its size: half the paper's reported gap where the paper reports one, else our
  stated choice; an effect of a claim in other units has its own :class:`Margin` in
  ``others``, matched by a phrase of its label (:func:`margin_for`);
- the planned number of seeds, computed from a pilot spread (each effect's per-seed
  standard deviation in the saved set's first :data:`PILOT_SEEDS` seeds, the pilot, with
  its test set's noise; seeds added to meet the plan do not move it) so that the minimum
  detectable effect at 80 % power, two-sided, is at most the margin
  (:func:`planned`, :func:`normlab.stats.n_needed`), at the Bonferroni level 0.05/k of a
  claim with k effects, which Holm's correction never makes stricter.

A margin that a rule also states (:class:`~normlab.claims.rules.Equivalent`,
:class:`~normlab.claims.rules.AtLeast`) is taken from the same constant, and a test checks
that the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .. import stats
from ..data.sources import STAND_INS
from ..experiments.part1 import FC_EPOCHS, FC_PRIMARY
from ..experiments.part1_batch import PRIMARY as BATCH_PRIMARY
from . import part1, part2  # noqa: F401  (their declarations fill CLAIMS, whose numbers we read)
from .part1 import ACCURACY_MARGIN
from .part1_batch import ACCURACY_SLOPE_MARGIN, SLOPE_MARGIN, STEPS_READING
from .registry import MARGIN_WORDS, Claim, get

__all__ = [
    "ACCURACY",
    "PILOT_SEEDS",
    "pilot",
    "Margin",
    "Plan",
    "PLANS",
    "plan",
    "margin_for",
    "specification",
    "data_words",
    "planned",
]

#: The units of an accuracy difference.
ACCURACY = "accuracy (0.01 = one point)"
#: The pilot behind every plan: a saved set's first five seeds (all of a smaller set), so
#: that a plan is fixed before the seeds it asks for are run.
PILOT_SEEDS = 5


def pilot(results: pd.DataFrame) -> pd.DataFrame:
    """The pilot's runs of a results table: those of seeds ``0`` to ``PILOT_SEEDS - 1``."""
    if "seed" not in results:
        raise ValueError("results must have a 'seed' column to find the pilot's runs")
    return results[results["seed"] < PILOT_SEEDS]


@dataclass(frozen=True)
class Margin:
    """The smallest effect that matters, its units and the reason for its size; ``match``
    is a phrase of the labels of the effects it is for (empty: the claim's default)."""

    margin: float
    tie: str
    units: str = ACCURACY
    match: str = ""

    def __post_init__(self) -> None:
        if not self.margin > 0:
            raise ValueError(f"margin must be positive, got {self.margin!r}")


@dataclass(frozen=True)
class Plan:
    """One empirical claim's plan (module docstring)."""

    estimand: str
    margin: float
    tie: str
    units: str = ACCURACY
    primary: Mapping[str, Any] = field(default_factory=dict)
    others: tuple[Margin, ...] = ()

    @property
    def default(self) -> Margin:
        return Margin(self.margin, self.tie, self.units)


def _gap(claim_id: str, a: str, b: str, of: str | None = None) -> float:
    """Half the paper's gap ``a - b`` (percentage points) of claim ``claim_id``, as a
    fraction; ``b`` is read from claim ``of`` when given."""
    left = get(claim_id).paper[a]
    right = get(of or claim_id).paper[b]
    return round(abs(left - right) / 200, 6)


def _half(claim_id: str, a: str, b: str, of: str | None = None) -> str:
    left = get(claim_id).paper[a]
    right = get(of or claim_id).paper[b]
    return (
        f"half the paper's {abs(left - right):.2f}-point gap ({a} {left:g} vs {b} "
        f"{right:g})"
    )


_OURS = "our choice, as the paper reports no number for it"
_FC = {**FC_PRIMARY, "head": "same", "epochs": FC_EPOCHS[FC_PRIMARY["source"]]}


def _gate_defaults() -> dict[str, Any]:
    from ..models.blocks import DEFAULT_INIT, DEFAULT_READOUT

    return {"init": DEFAULT_INIT, "readout": DEFAULT_READOUT, "selector_lr": 1.0}


_GATE = _gate_defaults()
# the gate grids' task that stands in for each paper dataset (data.sources.STAND_INS)
_GATE_TASK = {name: s.task for name, s in STAND_INS.items() if s.task is not None}
_SLOPE = "log2(epochs to the target) per doubling of the batch size"
_PER_DOUBLING = "accuracy per doubling of the batch size (0.01 = one point)"
_ACCURACY_SLOPE_TIE = (
    "half an accuracy point per doubling of the batch, three points over the 64-fold "
    f"range of batch sizes; {_OURS}"
)
_STEPS_MARGIN = Margin(
    SLOPE_MARGIN,
    "a tenth of a doubling of the data needed per doubling of the batch, a factor of "
    f"about 1.5 over a 64-fold range of batch sizes; {_OURS}",
    _SLOPE,
    STEPS_READING,
)
# A12, A13: SGD, Xavier-normal weights, steps to a target accuracy (chapter 7)
# both budget conventions: the paper's reading (fixed epochs) and the mechanism's
_BATCH = {k: v for k, v in BATCH_PRIMARY.items() if k != "budget"}
# N7: the paper's drop under corruption, clean accuracy (N3's table) minus CIFAR-10-C's mean
_DROP = {
    "AutoNorm-S": get("N3").paper["AutoNorm-S"]
    - get("N7").paper["AutoNorm-S CIFAR-10-C"],
    "FrozenLN": get("N3").paper["FrozenLN"] - get("N7").paper["FrozenLN"],
}

PLANS: dict[str, Plan] = {
    "A8": Plan(
        "test accuracy of affine-like minus norm-like, and of norm-like minus the strongest "
        "other normaliser, paired by seed, averaged over the grid's shapes",
        ACCURACY_MARGIN,
        "one accuracy point; our choice, as no accuracy of the paper is readable",
        primary=_FC,
    ),
    "A9": Plan(
        "the corrections' lead over the strongest rival at the larger width (depth) minus at "
        "the smaller, paired by seed",
        ACCURACY_MARGIN,
        f"one accuracy point of lead; {_OURS}",
        primary=_FC,
    ),
    "A10": Plan(
        "the corrections' lead with tanh minus with leaky-ReLU at the same shapes, and the "
        "lead with tanh",
        ACCURACY_MARGIN,
        f"one accuracy point of lead; {_OURS}",
        primary=_FC,
    ),
    "A11": Plan(
        "test accuracy of norm-like minus affine-like at depth 3, width 16, paired by seed",
        ACCURACY_MARGIN / 2,
        "half an accuracy point: the paper calls the lead 'slight' and gives no number",
        primary=_FC,
    ),
    "A12": Plan(
        "each correction's slope of the test accuracy after a fixed number of epochs "
        "against log2(batch size), per seed (the paper's quantity: negative when accuracy "
        "falls); and, as the mechanism, its slope of log2(epochs to a target validation "
        "accuracy) minus the other normalisers' mean slope, paired by seed",
        ACCURACY_SLOPE_MARGIN,
        _ACCURACY_SLOPE_TIE,
        units=_PER_DOUBLING,
        primary=_BATCH,
        others=(_STEPS_MARGIN,),
    ),
    "A13": Plan(
        "each rival normaliser's own slope of the test accuracy at fixed epochs against "
        "log2(batch size) (the paper's quantity: 0 when flat); and, as the mechanism, its "
        "slope of log2(epochs to a target validation accuracy): 0 under perfect scaling",
        ACCURACY_SLOPE_MARGIN,
        f"the rule's 'roughly flat'; {_ACCURACY_SLOPE_TIE}",
        units=_PER_DOUBLING,
        primary=_BATCH,
        others=(
            Margin(
                SLOPE_MARGIN,
                "the rule's 'roughly flat', a tenth of a doubling of the data needed per "
                "doubling of the batch; our choice",
                _SLOPE,
                STEPS_READING,
            ),
        ),
    ),
    "A14": Plan(
        "test accuracy of PatchNorm's better mode minus the stronger of LayerNorm and "
        "RMSNorm, paired by seed",
        ACCURACY_MARGIN,
        "the rule's 'on par', one accuracy point; our choice, as the paper gives no number",
    ),
    "A15": Plan(
        "test accuracy of affine-like minus the strongest scale-invariant normaliser, "
        "paired by seed",
        ACCURACY_MARGIN,
        "the rule's 'matches', not worse by one accuracy point; our choice",
        primary=_FC,
    ),
    "N1": Plan(
        "test accuracy of AutoNorm minus the Random Selector, paired by seed",
        _gap("N1", "Random", "AutoNorm (CIFAR-10)"),
        _half("N1", "Random", "AutoNorm (CIFAR-10)"),
        primary={**_GATE, "data": _GATE_TASK["cifar10"]},
    ),
    "N2": Plan(
        "test accuracy of the gate trained with the exact gradient minus the Gumbel-Softmax "
        "gradient, the same sampled gate in the forward pass, paired by seed",
        ACCURACY_MARGIN,
        f"one accuracy point; {_OURS}",
        primary=_GATE,
    ),
    "N3": Plan(
        "test accuracy of AutoNorm-S minus FrozenLN and minus AutoNorm, paired by seed",
        _gap("N3", "AutoNorm-S", "FrozenLN"),
        _half("N3", "AutoNorm-S", "FrozenLN"),
        primary={**_GATE, "data": _GATE_TASK["cifar10"]},
        others=(
            Margin(
                _gap("N3", "AutoNorm-S", "AutoNorm (CIFAR-10)", of="N1"),
                _half("N3", "AutoNorm-S", "AutoNorm (CIFAR-10)", of="N1"),
                match="- autonorm on",
            ),
        ),
    ),
    "N4": Plan(
        "AutoNorm-S's lead over FrozenLN on CIFAR-100 minus its next largest vision lead",
        ACCURACY_MARGIN,
        "one accuracy point; our choice, as the paper's own leads, 2.33 points on "
        "CIFAR-100 and 3.38 on CIFAR-10, do not order as the claim says",
    ),
    "N5": Plan(
        "test accuracy of AutoNorm-S minus FrozenLN on MNIST-like data, paired by seed",
        0.005,
        "the rule's 'no real gain', half a point, against the paper's 0.36-point MNIST "
        "gap that it calls within the CI",
        primary={**_GATE, "data": _GATE_TASK["mnist"]},
    ),
    "N6": Plan(
        "test accuracy of AdaNorm minus the strongest other normaliser on SVHN",
        _gap("N6", "AdaNorm", "FrozenLN"),
        _half("N6", "AdaNorm", "FrozenLN"),
    ),
    "N7": Plan(
        "the drop under corruption (clean minus mean corruption accuracy), FrozenLN's "
        "minus AutoNorm-S's, paired by seed",
        round(abs(_DROP["FrozenLN"] - _DROP["AutoNorm-S"]) / 200, 6),
        f"half the paper's {abs(_DROP['FrozenLN'] - _DROP['AutoNorm-S']):.2f}-point "
        f"difference in drop (FrozenLN {_DROP['FrozenLN']:.2f}, AutoNorm-S "
        f"{_DROP['AutoNorm-S']:.2f} points, clean minus CIFAR-10-C)",
    ),
    "N8": Plan(
        "token accuracy of AutoNorm-S minus FrozenLN on POS tagging, paired by seed",
        _gap("N8", "AutoNorm-S", "FrozenLN"),
        _half("N8", "AutoNorm-S", "FrozenLN"),
        primary={"data": "ptb_pos"},
    ),
    "N9": Plan(
        "sentence accuracy of AutoNorm-S minus FrozenLN on SST-2, paired by seed",
        _gap("N9", "AutoNorm-S", "FrozenLN"),
        _half("N9", "AutoNorm-S", "FrozenLN"),
        primary={"data": "sst2"},
    ),
    "N10": Plan(
        "learned AutoNorm's gate entropy, mean over layers, each language task minus the "
        "image task: averaged over the same epochs, and at matched training progress (the "
        "first epoch at 80 % of the way from chance to the run's best validation accuracy)",
        0.05,
        f"0.05 nats, about 7 % of the largest entropy (ln 2); {_OURS}",
        units="gate entropy (nats)",
    ),
    "N11": Plan(
        "at the last epoch: the image task's weight on LayerNorm minus 1/2; per language "
        "task, gate entropy minus eps_H and the slope of the weight on DyT over relative "
        "depth",
        0.05,
        f"a weight of 0.05 on either normaliser; {_OURS}",
        units="gate weight on LayerNorm",
        others=(
            Margin(
                0.05,
                f"0.05 nats, half of eps_H; {_OURS}",
                "gate entropy (nats)",
                match="entropy",
            ),
            Margin(
                0.05,
                f"a weight change of 0.05 from the first layer to the last; {_OURS}",
                "gate weight per unit of relative depth",
                match="slope",
            ),
        ),
    ),
    "N12": Plan(
        "relative test RMSE of AutoNorm-S against FrozenLN, (a - b)/b, paired by seed: "
        "positive when AutoNorm-S's error is the larger",
        0.02,
        "the rule's 'negligible', 2 % of the RMSE; our choice, against the paper's "
        "California gap of 0.27 %",
        units="relative RMSE",
    ),
    "N13": Plan(
        "soft minus hard gate: mean validation accuracy over the epochs, paired by seed",
        ACCURACY_MARGIN,
        f"one accuracy point averaged over training; {_OURS}",
        primary=_GATE,
    ),
    "N14": Plan(
        "AutoNorm-S's lead over FrozenLN on the more diverse data minus on the less diverse",
        ACCURACY_MARGIN,
        f"one accuracy point of lead; {_OURS}",
        primary=_GATE,
    ),
}


MARGIN_WORDS.update(
    {
        claim_id: f"The margin: ±{p.margin:g} in {p.units}; {p.tie}"
        for claim_id, p in PLANS.items()
    }
)


def plan(claim_id: str) -> Plan | None:
    """The plan of claim ``claim_id`` (None for a claim without one: exact, conceptual, or
    one declared outside the book's registry)."""
    return PLANS.get(claim_id)


def margin_for(claim_id: str, label: str) -> Margin | None:
    """The margin of the effect ``label`` of claim ``claim_id``: the first of the plan's
    ``others`` whose phrase the label contains, else the plan's default."""
    found = plan(claim_id)
    if found is None:
        return None
    for other in found.others:
        if other.match in label:
            return other
    return found.default


# ------------------------------------------------------------ the primary specification


def data_words(
    claim: Claim,
    tasks: Sequence[str],
    profile: str,
    chosen: str | Mapping[str, str] | None = None,
) -> tuple[str, bool]:
    """What ``tasks`` were in ``profile`` (``chosen``: the grid's ``source`` setting, where
    it chose a task's offline dataset, or the source per task), and whether any was a
    stand-in: e.g. ("8×8 digits, a
    stand-in for CIFAR-10", True) or ("CIFAR-10", False)."""
    from ..data import REAL, served_by, title
    from ..data.sources import CHOICES, RESTYLED

    def served(task: str) -> str:
        if isinstance(chosen, Mapping):  # the source per task (the gate studies)
            return title(served_by(task, profile, chosen))
        # a set of several tasks chose a dataset for one of them (autonorm_gates: mnist)
        own = chosen in CHOICES.get(task.removesuffix(RESTYLED), ())
        return title(served_by(task, profile, chosen if own else None))

    used = ", ".join(dict.fromkeys(served(t) for t in tasks))
    real = [t.removesuffix(RESTYLED) for t in tasks]
    if all(t in REAL for t in real) and used == ", ".join(
        dict.fromkeys(title(t) for t in tasks)
    ):
        return used, False
    if claim.datasets:
        return (
            f"{used}, a stand-in for {', '.join(title(d) for d in claim.datasets)}",
            True,
        )
    return f"{used} (a stand-in; the claim names no dataset)", True


_MODEL = (
    ("depth", "depth"),
    ("width", "width"),
    ("channels", "channels"),
    ("stride", "first stride"),
    ("dim", "dim"),
    ("heads", "heads"),
    ("patch_size", "patch"),
    ("activation", ""),
)


def _values(items: Sequence[Any]) -> str:
    return "/".join(str(v) for v in items)


def specification(claim_id: str, profile: str) -> dict[str, Any]:
    """The claim's primary specification in ``profile``, read from its experiment's grid:
    ``data`` (the task, named as the stand-in that serves it where one does), ``model``,
    ``init``, ``optimiser``, ``budget`` (each convention, epochs, batch size and the rates
    the validation split chooses from) and ``rates``, the rates each arm tried; an axis
    the grid sweeps shows every value."""
    from .. import experiments

    claim = get(claim_id)
    test = claim.test
    if test is None or not hasattr(test, "experiment"):
        raise ValueError(f"claim {claim_id} runs no experiment")
    exp = experiments.get(test.experiment)
    if profile not in exp.profiles:
        raise ValueError(
            f"{test.experiment} has no {profile!r} grid; it has {', '.join(exp.profiles)}"
        )
    grid = exp.grid(profile)
    values: dict[str, list[Any]] = {k: [v] for k, v in grid.fixed.items()}
    values.update({k: list(v) for k, v in grid.axes.items()})
    found = plan(claim_id)
    for key, value in (found.primary if found else {}).items():
        # a primary task the grid does not hold (a CPU stand-in, on a GPU grid) fixes nothing
        if key in values and (key != "data" or value in values[key]):
            values[key] = [value]
    data_profile = values.get("data_profile", [profile])[0]
    # the grid's source, where it names one, is the dataset that served the task; where
    # the grid pairs each task with its own source (the gate studies), the source per task;
    # where it names a source for some tasks only (autonorm_gates: the image task's), that
    # source serves the tasks it can
    sources = values.get("source", ())
    chosen: str | dict[str, str] | None = sources[0] if len(sources) == 1 else None
    tasks = [str(t) for t in values.get("source", values.get("data", []))]
    if None in sources:
        tasks = [str(t) for t in values.get("data", [])]
        chosen = next(str(v) for v in sources if v is not None)
    elif len(sources) > 1 and "data" in values:
        chosen = {
            str(c["data"]): str(c["source"])
            for c in grid.configs(1)
            if c["data"] in values["data"] and c["source"] in sources
        }
        tasks = [str(t) for t in values["data"] if t in chosen]
    optimiser = (
        _values(values["optimizer"]).upper().replace("ADAM", "Adam")
        if "optimizer" in values
        else "AdamW"
    )
    if "weight_decay" in values:
        optimiser += f", weight decay {_values(values['weight_decay'])}"
    schedule = values.get("schedule", ["warm-up + cosine"])
    tried = _tried(grid, values)
    return {
        "data": data_words(claim, tasks, data_profile, chosen)[0],
        "model": _model(values),
        "init": _values(values.get("init", ["PyTorch default"])),
        "optimiser": f"{optimiser}, {_values(schedule)} schedule",
        "budget": "; ".join(
            _budget(values, budget, tried.get(budget), grid)
            # the paper's convention (fixed epochs) first where a grid has several
            for budget in sorted(
                values.get("budget", ["fixed_epochs"]),
                key=lambda b: b != "fixed_epochs",
            )
        ),
        "rates": {arm: _values(rates) for arm, rates in tried.get(None, {}).items()},
    }


def _model(values: Mapping[str, list[Any]]) -> str:
    """The network of a specification in words: its kind and shape."""
    kind = (
        "MLP"
        if "width" in values
        else "CNN"
        if "channels" in values
        else "transformer"
        if "dim" in values
        else "transformer at the paper's size"
        if "patch_size" in values or "heads" in values or "tau" in values
        else "network"
    )
    shape = ", ".join(
        f"{name} {_values(values[key])}".strip()
        for key, name in _MODEL
        if key in values and values[key] != [None]
    )
    return f"{kind}, {shape}"


def _tried(grid: Any, values: Mapping[str, list[Any]]) -> dict[Any, dict[str, list]]:
    """The rates each arm (a value of the grid's ``normaliser`` or ``arm`` axis) tries in
    the configurations of ``values`` (the grid's points that the primary specification
    keeps), per budget convention and over all of them (key None)."""
    tried: dict[Any, dict[str, set]] = {}
    for config in _kept(grid, values):
        arm = config.get("normaliser", config.get("arm"))
        if arm is None or "lr" not in config:
            continue
        for key in (None, config.get("budget")):
            tried.setdefault(key, {}).setdefault(str(arm), set()).add(config["lr"])
    return {k: {a: sorted(r) for a, r in v.items()} for k, v in tried.items()}


def _kept(grid: Any, values: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """The grid's points (one seed each) that the primary specification's ``values``
    keep."""
    keep = {k: v for k, v in values.items() if k not in ("lr", "seed")}
    return [
        c
        for c in grid.configs(1)
        if not any(k in c and c[k] not in v for k, v in keep.items())
    ]


def _budget(
    values: Mapping[str, list[Any]],
    budget: str,
    tried: Mapping[str, list] | None,
    grid: Any = None,
) -> str:
    """One budget convention of the specification in words, with the rates its arms
    tried: each arm's own (see the specification's ``rates``), or one list they share."""
    lists = {tuple(r) for r in (tried or {}).values()}
    rates = (
        _values(lists.pop())
        if len(lists) == 1
        else f"each arm's own {min(map(len, lists))} to {max(map(len, lists))} rates"
        if lists
        else _values(values.get("lr", ["?"]))
    )
    if grid is not None and "budget" in values:
        sizes = sorted(
            {c["batch_size"] for c in _kept(grid, values) if c["budget"] == budget}
        )
        values = {**values, "batch_size": sizes or values.get("batch_size", ["?"])}
    if budget == "to_target":
        return _to_target(values, rates)
    return (
        f"{budget.replace('_', ' ')}: {_values(values.get('epochs', ['?']))} epochs, "
        f"batch {_values(values.get('batch_size', ['?']))}; lr chosen on val from {rates}"
    )


def _to_target(values: Mapping[str, list[Any]], rates: str) -> str:
    """The steps-to-target budget of A12 and A13 (chapter 7) in words."""
    return (
        f"steps to {_values(values['target'])} val accuracy (cap: "
        f"{_values(values['cap_epochs'])} epochs and at least "
        f"{_values(values['cap_steps'])} steps), batch {_values(values['batch_size'])}; "
        f"per batch size the lr with the fewest steps, from {rates}"
    )


def planned(
    spreads: Sequence[tuple[float, float, float, int | None, bool]],
) -> tuple[int | None, int | None]:
    """The planned seeds, and test items where the present test set is too small, of a
    claim whose effects have the pilot ``spreads`` ``(sd, item_var, margin, n_test,
    equivalence)``, at the level 0.05/k of k effects and 80 % power: for a directional or
    non-inferiority effect, a minimum detectable effect at most the margin
    (:func:`normlab.stats.n_needed`); for an equivalence, an interval inside the margin
    when the true difference is 0 (:func:`normlab.stats.n_needed_equivalence`). The most
    any effect needs; (None, None) without a usable spread."""
    usable = [s for s in spreads if s[0] == s[0] and s[2] > 0]
    if not usable:
        return None, None
    alpha = stats.ALPHA / len(usable)

    def seeds(
        sd: float, item_var: float, margin: float, equivalence: bool
    ) -> int | None:
        if equivalence:
            return stats.n_needed_equivalence(
                sd, margin, item_var=item_var, alpha=alpha
            )
        return stats.n_needed(sd, margin, item_var=item_var, alpha=alpha)

    most, items = 2, None
    for sd, item_var, margin, n_test, equivalence in usable:
        n = seeds(sd, item_var, margin, equivalence)
        if n is None and n_test:
            more = stats.items_needed(item_var, n_test, margin, alpha=alpha)
            items = max(items or 0, more)
            n = seeds(sd, item_var * n_test / more, margin, equivalence)
        if n is None:
            return None, items
        most = max(most, n)
    return most, items
