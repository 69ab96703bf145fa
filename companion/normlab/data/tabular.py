"""The papers' regression datasets: UCI Energy Efficiency and California Housing.

Features and targets are standardised with the mean and standard deviation of the *train*
split. ``meta["target_mean"]`` and ``meta["target_scale"]`` undo it:
``y_original = y * target_scale + target_mean``, so an RMSE on standardised targets times
``target_scale`` is the RMSE in the original units. Splits: a fixed permutation (seed 0),
70 % train / 10 % val / 20 % test, since neither source has official splits.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ._common import check_split, regression_split
from ._download import Resource, cache_root, check_reachable, ensure_file
from .types import DataSplit

__all__ = [
    "ENERGY_FEATURES",
    "ENERGY_TARGETS",
    "ENERGY",
    "ENERGY_CSV",
    "ENERGY_ROWS",
    "read_energy",
    "energy_efficiency",
    "california_housing",
    "LOADERS",
]

ENERGY_FEATURES = [
    "relative_compactness",
    "surface_area",
    "wall_area",
    "roof_area",
    "overall_height",
    "orientation",
    "glazing_area",
    "glazing_area_distribution",
]
ENERGY_TARGETS = ["heating_load", "cooling_load"]
ENERGY = Resource(
    url="https://archive.ics.uci.edu/ml/machine-learning-databases/00242/ENB2012_data.xlsx",
    filename="ENB2012_data.xlsx",
    unpinned="UCI publishes no checksum for ENB2012_data.xlsx; the loader checks 768 rows x 10 columns",
)
ENERGY_CSV = "ENB2012_data.csv"
ENERGY_ROWS = 768


def read_energy(path: str | Path) -> np.ndarray:
    """The ENB2012 table as a float array ``(768, 10)``: X1..X8 then Y1, Y2.

    Reads the UCI ``.xlsx`` (needs ``openpyxl``) or a ``.csv`` copy with the same columns
    (a header row, then X1..X8, Y1, Y2). Blank trailing rows and columns are dropped.
    """
    import pandas as pd

    path = Path(path)
    if path.suffix == ".xlsx":
        try:
            table = pd.read_excel(path)
        except ImportError as error:
            raise ImportError(
                f"reading {path} needs openpyxl (pip install 'normlab[data]'), or save the sheet as "
                f"{path.with_name(ENERGY_CSV)} and load again"
            ) from error
    else:
        table = pd.read_csv(path)
    array = (
        table.dropna(axis=0, how="all")
        .dropna(axis=1, how="all")
        .to_numpy(dtype=np.float64)
    )
    if array.shape[1] != 10:
        raise ValueError(
            f"{path} has {array.shape[1]} columns, expected 10 (X1..X8, Y1, Y2)"
        )
    return array


@lru_cache(maxsize=2)
def _energy_array(root: str, download: bool) -> np.ndarray:
    folder = Path(root) / "energy_efficiency"
    if (folder / ENERGY_CSV).is_file():
        return read_energy(folder / ENERGY_CSV)
    path = ensure_file(ENERGY, folder, download_ok=download, standin="diabetes")
    array = read_energy(path)
    if array.shape[0] != ENERGY_ROWS:
        raise ValueError(
            f"{path} has {array.shape[0]} rows, expected {ENERGY_ROWS}; delete it and download again"
        )
    return array


def energy_efficiency(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """UCI Energy Efficiency (Tsanas & Xifara 2012): 768 simulated buildings, 8 features.

    Source: UCI ML repository dataset 242, ``ENB2012_data.xlsx`` (no published checksum;
    the file is checked for 768 rows x 10 columns). Reading ``.xlsx`` needs ``openpyxl``;
    a ``ENB2012_data.csv`` copy in ``<root>/energy_efficiency/`` is read first if present.
    Target: heating load Y1 only (kWh/m^2, about 6-43), ``y`` shape ``(N,)``; the cooling
    load Y2 is not used. Splits 70/10/20 % (537 / 76 / 155, seed 0), standardised with
    train statistics. Licence: CC BY 4.0. Quick-profile stand-in: ``diabetes``.
    """
    check_split(split)
    array = _energy_array(str(cache_root(root)), download)
    return regression_split(
        "energy_efficiency",
        split,
        array[:, :8],
        array[:, 8],
        {
            "feature_names": ENERGY_FEATURES,
            "target_names": ENERGY_TARGETS[:1],
            "source": "UCI ENB2012_data",
        },
    )


@lru_cache(maxsize=2)
def _california_arrays(
    root: str, download: bool
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    from sklearn.datasets import fetch_california_housing
    from sklearn.datasets._california_housing import ARCHIVE

    data_home = Path(root) / "scikit_learn_data"
    if download and not (data_home / "cal_housing_py3.pkz").is_file():
        check_reachable(
            ARCHIVE.url,
            resource_name="cal_housing_py3.pkz (via sklearn's fetcher)",
            folder=data_home,
            standin="diabetes",
        )
    try:
        # scikit-learn's fetcher checks the archive's SHA-256 and writes through a temp file.
        bunch = fetch_california_housing(
            data_home=str(data_home), download_if_missing=download
        )
    except OSError as error:
        raise FileNotFoundError(
            f"California Housing is not in {data_home} and download=False; call load with download=True "
            f"or use the quick-profile stand-in 'diabetes'"
        ) from error
    return (
        bunch.data.astype(np.float64),
        bunch.target.astype(np.float64),
        list(bunch.feature_names),
    )


def california_housing(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """California Housing (Pace & Barry 1997): 20,640 census block groups, 8 features.

    Source: ``sklearn.datasets.fetch_california_housing`` (its cache in
    ``<root>/scikit_learn_data``; scikit-learn pins the archive's SHA-256). Target: median
    house value in units of $100,000. Splits 70/10/20 % (14,448 / 2,064 / 4,128, seed 0),
    standardised with train statistics. Licence: none stated by StatLib.
    Quick-profile stand-in: ``diabetes``.
    """
    check_split(split)
    features, target, names = _california_arrays(str(cache_root(root)), download)
    return regression_split(
        "california_housing",
        split,
        features,
        target,
        {
            "feature_names": names,
            "target_names": ["MedHouseVal"],
            "source": "sklearn.datasets.fetch_california_housing",
        },
    )


LOADERS = {
    "energy_efficiency": energy_efficiency,
    "california_housing": california_housing,
}
