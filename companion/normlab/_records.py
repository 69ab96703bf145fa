"""Run records as strict JSON, and the schema every record must meet.

A run record is what the runner stores for one finished run (``run_id``, ``experiment``,
``profile``, ``config``, ``metric``, ``higher_is_better``, ``metrics``, ``seconds``, and
whatever the experiment adds: a history, gates, corruption rows). JSON has no NaN or
infinity, so a non-finite number is written as ``null`` (Python's ``json`` would write a bare
``NaN``, which Node, jq and most other readers reject), and read back as NaN everywhere
outside ``config`` (where ``null`` means a setting left at None). A non-finite training
metric means the run diverged, so the record is marked ``diverged`` when it is written.
Other metrics may be ``null`` where they are not defined for a run (for example the entropy
at a freeze decision of an arm that never decides). Text nested deeper than
:data:`MAX_DEPTH` is refused (:func:`loads`), so no file can exhaust the recursion of its
reader.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "CORE_METRICS",
    "MAX_DEPTH",
    "RUN_ID",
    "RecordError",
    "check",
    "decode",
    "dumps",
    "encode",
    "loads",
    "parse",
]

#: ``<experiment>-<12 hex digits>`` (:func:`normlab.experiments.grid.run_id`): a plain name,
#: so no record can point outside its folder.
RUN_ID = re.compile(r"[A-Za-z0-9_]+-[0-9a-f]{12}")
#: The deepest nesting of arrays and objects a record or manifest may have (they have 4):
#: deeper text is refused before anything walks it recursively.
MAX_DEPTH = 32
#: A JSON string (in text already parsed, so every string is closed), and what is not a bracket.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
#: The training metrics every record has: finite, or the run is marked diverged.
CORE_METRICS = ("train_loss", "val_loss", "val_metric", "test_loss", "test_metric")
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "run_id": str,
    "experiment": str,
    "profile": str,
    "config": dict,
    "metric": str,
    "higher_is_better": bool,
    "metrics": dict,
    "seconds": (int, float),
}


class RecordError(ValueError):
    """A run record that is not valid JSON or does not meet the schema."""


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def _none_to_nan(value: Any) -> Any:
    if value is None:
        return math.nan
    if isinstance(value, dict):
        return {k: _none_to_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_none_to_nan(v) for v in value]
    return value


def encode(record: Any) -> Any:
    """``record`` with non-finite numbers as None, and marked diverged if a training
    metric is not finite."""
    metrics = record.get("metrics") if isinstance(record, dict) else None
    lost = isinstance(metrics, dict) and any(
        isinstance(metrics.get(k), float) and not math.isfinite(metrics[k])
        for k in CORE_METRICS
    )
    out = _finite_or_none(record)
    if lost:
        out["metrics"]["diverged"] = True
    return out


def decode(record: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`encode`: None is NaN again, except in ``config``."""
    return {
        k: v if k in ("config", "run_id") else _none_to_nan(v)
        for k, v in record.items()
    }


def dumps(record: dict[str, Any], *, indent: int | None = None) -> str:
    """Strict JSON for one record (one line unless ``indent``)."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(
        encode(record), allow_nan=False, indent=indent, separators=separators
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (write non-finite numbers as null)")


def _too_deep(text: str) -> bool:
    """Whether valid JSON ``text`` nests deeper than :data:`MAX_DEPTH`: each pass removes
    the innermost pairs of brackets, so text of depth d is empty after d passes."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(MAX_DEPTH):
        if not brackets:
            return False
        brackets = brackets.replace("[]", "").replace("{}", "")
    return bool(brackets)


def loads(text: str, where: str, *, strict: bool = True) -> Any:
    """JSON ``text`` at most :data:`MAX_DEPTH` deep (``strict``: no bare ``NaN`` or
    ``Infinity``), else a :class:`RecordError` naming ``where``."""
    deep = RecordError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_reject_constant if strict else None)
    except RecursionError:
        raise deep from None
    except ValueError as err:
        reason = "empty" if not text.strip() else f"not valid JSON ({err})"
        raise RecordError(f"{where}: {reason}") from None
    if _too_deep(text):  # parsed, so its strings are closed and the scan is linear
        raise deep
    return value


def check(record: Any, where: str) -> dict[str, Any]:
    """``record`` when it meets the schema, else a :class:`RecordError` naming ``where``."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: a run record is a JSON object, got {record!r:.60}")
    missing = [k for k in _FIELDS if k not in record]
    if missing:
        raise RecordError(
            f"{where}: not a complete run record (missing {', '.join(missing)})"
        )
    wrong = [k for k, kind in _FIELDS.items() if not isinstance(record[k], kind)]
    if wrong:
        raise RecordError(f"{where}: wrong type for {', '.join(wrong)}")
    if not RUN_ID.fullmatch(record["run_id"]):
        raise RecordError(
            f"{where}: run_id={record['run_id']!r} is not <experiment>-<12 hex digits>"
        )
    metrics = record["metrics"]
    absent = [k for k in (*CORE_METRICS, "diverged") if k not in metrics]
    if absent:
        raise RecordError(f"{where}: metrics lack {', '.join(absent)}")
    if not isinstance(metrics["diverged"], bool):
        raise RecordError(f"{where}: metrics.diverged must be true or false")
    for key in CORE_METRICS:
        value = metrics[key]
        if value is not None and not isinstance(value, (int, float)):
            raise RecordError(f"{where}: metrics.{key} must be a number or null")
        finite = value is not None and math.isfinite(value)
        if not finite and not metrics["diverged"]:
            raise RecordError(
                f"{where}: metrics.{key} is {value!r} but the run is not marked diverged"
            )
    return record


def parse(text: str, where: str, *, strict: bool = True) -> dict[str, Any]:
    """One record from JSON text, schema-checked and decoded (:func:`decode`).

    ``strict`` refuses a bare ``NaN``/``Infinity`` (packed sets are strict JSON); the
    runner's older scratch files may hold them, so it reads with ``strict=False``.
    """
    raw = loads(text, where, strict=strict)
    return decode(check(encode(raw) if not strict else raw, where))
