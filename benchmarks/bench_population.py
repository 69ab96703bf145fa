"""Runs per CPU-second: a population of K seeds (``normlab.population``) against single runs.

For each model family (the fc MLP of ``fc_normalisers``, the CNN of ``cnn_normalisers``, the
gate ViT of ``gate_bottleneck``), one configuration of the experiment's quick grid with a
one-epoch budget is trained as the experiment trains it (``run_one``: build, train, test,
record) and as a population (``run_population``: the same, K members at once), in one
process, single runs and populations alternating. Each is timed in CPU seconds
(``time.process_time``; with one torch thread, what other jobs on the machine do not
stretch), and the script prints runs per CPU-second of each and their ratio.

    .venv/bin/python benchmarks/bench_population.py                 # K = 8, 32, 64
    .venv/bin/python benchmarks/bench_population.py --ks 16 --families gate --reps 1
    .venv/bin/python benchmarks/bench_population.py --device cuda --clock wall
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from normlab.experiments import RunContext, get

#: family -> (experiment, the quick grid's config to time, changed to these settings)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "fc": (
        "fc_normalisers",
        {"normaliser": "batchnorm", "optimizer": "sgd", "lr": 0.1},
    ),
    "cnn": ("cnn_normalisers", {"normaliser": "norm_like", "lr": 0.3}),
    "gate": ("gate_bottleneck", {"arm": "autonorm"}),
}


def base_config(name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """The first quick-grid config of ``name`` with ``changes`` and a one-epoch budget."""
    config = dict(get(name).runs("quick")[0].config)
    return {**config, **changes, "epochs": 1}


def timed(fn: Callable[[], Any], clock: Callable[[], float]) -> float:
    started = clock()
    fn()
    return clock() - started


def measure(
    family: str,
    k: int,
    reps: int,
    singles: int,
    device: str,
    clock: Callable[[], float],
) -> dict[str, float]:
    """Runs per second of single runs and of a K-member population, medians of ``reps``."""
    name, changes = FAMILIES[family]
    experiment, config = get(name), base_config(name, changes)
    ctx = RunContext(device=torch.device(device), checkpoint_dir=None)
    seeds = list(range(k))
    configs = [{**config, "seed": s} for s in seeds]
    # warm-up, untimed: the data's first load and torch's first calls
    experiment.run_one(configs[0], ctx)
    experiment.run_population(configs[:2], ctx)
    single_rates, pop_rates = [], []
    for rep in range(reps):  # alternate, so that a change of load hits both
        chosen = seeds[rep * singles : (rep + 1) * singles] or seeds[:singles]
        spent = timed(
            lambda chosen=chosen: [
                experiment.run_one({**config, "seed": s}, ctx) for s in chosen
            ],
            clock,
        )
        single_rates.append(len(chosen) / spent)
        pop_rates.append(
            k / timed(lambda: experiment.run_population(configs, ctx), clock)
        )
    single, pop = statistics.median(single_rates), statistics.median(pop_rates)
    return {"single": single, "population": pop, "ratio": pop / single}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument(
        "--families", nargs="+", default=list(FAMILIES), choices=FAMILIES
    )
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument(
        "--singles", type=int, default=2, help="single runs timed per rep"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"device={args.device} threads={args.threads} clock={args.clock} "
        f"torch={torch.__version__} reps={args.reps} singles/rep={args.singles}"
    )
    print(
        f"{'family':<6} {'K':>4} {'single runs/s':>14} {'population runs/s':>18} {'ratio':>7}"
    )
    for family in args.families:
        for k in args.ks:
            got = measure(family, k, args.reps, args.singles, args.device, clock)
            print(
                f"{family:<6} {k:>4} {got['single']:>14.3f} {got['population']:>18.3f} "
                f"{got['ratio']:>6.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
