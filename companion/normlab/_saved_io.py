"""The one door into a saved set (:mod:`normlab.results`): its files read as untrusted input
and checked against its manifest before any record or table is used.

A set is the folder ``<root>/<experiment>/<profile>/`` that holds ``manifest.json``,
``runs.jsonl`` and ``results.csv``. A file is read only if it is a regular file (not a link,
a named pipe or a device) within its size limit (:data:`LIMITS`), by a bounded read, so no
file can make a reader hang or run out of memory; JSON is strict and at most
:data:`normlab._records.MAX_DEPTH` deep. Then, in order: the manifest meets the schema and
its own digest, and names the experiment and profile of its folder; ``runs.jsonl`` and
``results.csv`` match the manifest's digests; every record meets the schema, matches its
digest and belongs to the set; the records are exactly the runs of the experiment's grid
(the seed count bounded before the grid is built); and ``results.csv`` holds exactly the
records' values. The records are parsed after a failed digest too, but only to name every
problem (:func:`problems`, what ``python -m normlab verify`` prints); :func:`open_set`
returns nothing from a set with a problem, and raises one :class:`SetError` naming the set,
the file and what is wrong.

A set is checked once per process for the bytes read: :func:`open_set` reads and hashes the
three files every time, and a changed byte makes a set that is checked afresh.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from ._records import RUN_ID, RecordError, loads, parse
from ._runtime import PROFILES
from .experiments import get as get_experiment
from .experiments.grid import run_id as _run_id
from .experiments.runner import MANIFEST, PACKED
from .run_tables import records_table

TABLE = "results.csv"
#: The manifest format this normlab reads and writes (3: the manifest carries its own digest).
FORMAT = 3
#: The most seeds a manifest may declare, checked before its grid is built.
MAX_SEEDS = 1000
#: The folder inside a set where a save stages its three new files before moving them into
#: place (:func:`normlab.results.finish_pending`); present only while a save runs or after
#: one stopped part-way.
STAGING = ".pack-new"
#: The largest file of each name a set may hold (the shipped sets' are a few MB at most).
LIMITS = {MANIFEST: 8 << 20, PACKED: 64 << 20, TABLE: 16 << 20}


def sha(data: str | bytes) -> str:
    """The SHA-256 of ``data`` (text as UTF-8), in hex."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


@dataclass(frozen=True)
class Mismatch:
    """One problem found in a saved set: where (a file, a line, a re-run), and what differs."""

    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


class SetError(ValueError):
    """A saved set that fails its checks. ``name`` is its ``experiment/profile`` (as its
    folder says), ``problems`` every problem found; the message names the first one's file."""

    def __init__(self, name: str, problems: list[Mismatch]) -> None:
        self.name = name
        self.problems = list(problems)
        more = len(self.problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"{name}: {self.problems[0]}{tail}")


class _Refused(Exception):
    """A problem that ends the check of a set."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.mismatch = Mismatch(where, problem)


# ------------------------------------------------------------------------ the files

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISSOCK, "a socket"),
)
# O_NOFOLLOW: a link put in place after the lstat is not followed; O_NONBLOCK: nor does a
# named pipe block the open. The fstat after it then refuses whatever is not a regular file.
_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a plain file")


def _read(folder: Path, name: str) -> bytes:
    """The bytes of ``folder/name``, a regular file of at most ``LIMITS[name]`` bytes."""
    path, limit = folder / name, LIMITS[name]
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
    too_large = f"is larger than the {size} a set's {name} may be"
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(name, f"is {_kind(info.st_mode)}, not a regular file")
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise _Refused(name, "is missing") from None
    except OSError as err:
        raise _Refused(name, f"cannot be read ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(name, f"is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise _Refused(name, too_large)
        # one byte more than allowed tells a file that grew since the fstat
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise _Refused(name, f"cannot be read ({err.strerror})") from None
    finally:
        os.close(fd)
    if left <= 0:
        raise _Refused(name, too_large)
    return b"".join(chunks)


def _read_all(folder: Path) -> tuple[dict[str, bytes], list[Mismatch]]:
    """The set's three files, and a problem for each one that cannot be read."""
    raw: dict[str, bytes] = {}
    refused: list[Mismatch] = []
    for name in LIMITS:
        try:
            raw[name] = _read(folder, name)
        except _Refused as err:
            refused.append(err.mismatch)
    return raw, refused


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(name, "is not UTF-8 text") from None


def _reason(err: RecordError, where: str) -> str:
    """A RecordError's message without the ``where`` it starts with."""
    return str(err).removeprefix(f"{where}: ")


# ----------------------------------------------------------------------- the manifest


def manifest_digest(manifest: dict[str, Any]) -> str:
    """The SHA-256 of ``manifest`` without its ``digest``, as canonical JSON (sorted keys,
    no spaces, ASCII)."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return sha(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    )


def signed(manifest: dict[str, Any]) -> str:
    """The text of ``manifest.json``: ``manifest`` with its :func:`manifest_digest` last."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return json.dumps({**body, "digest": manifest_digest(body)}, indent=1) + "\n"


_HEX = set("0123456789abcdef")
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "experiment": str,
    "profile": str,
    "runs": int,
    "seeds": int,
    "data": str,
    "datasets": list,
    "commands": list,
    "command": str,
    "hardware": dict,
    "wall_seconds": (int, float),
    "exact_on": (dict, type(None)),
    "files": dict,
    "records": dict,
    "commits": dict,
    "digest": str,
}


def _is_sha(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _schema_problem(m: Any) -> str | None:
    """What keeps ``m`` from being a manifest of :data:`FORMAT`, or None."""
    if not isinstance(m, dict):
        return "a manifest is a JSON object"
    if isinstance(m.get("format"), int) and m["format"] != FORMAT:
        return (
            f"format {m['format']}, this normlab reads {FORMAT}; re-pack the set with "
            "normlab.results.repack(folder)"
        )
    missing = [k for k in _FIELDS if k not in m]
    if missing:
        return (
            f"not a manifest of format {FORMAT} (missing {', '.join(missing)}); "
            "re-pack the set with `python -m normlab save`"
        )
    wrong = [
        k
        for k, kind in _FIELDS.items()
        if not isinstance(m[k], kind) or (kind is int and isinstance(m[k], bool))
    ]
    if wrong:
        return f"wrong type for {', '.join(wrong)}"
    if m["profile"] not in PROFILES:
        return f"profile={m['profile']!r} is not one of {PROFILES}"
    # a shard's set may hold seed 2 and not seed 1, so seeds may exceed runs; the grid
    # check decides whether the records are that many seeds' runs
    if not 1 <= m["seeds"] <= MAX_SEEDS:
        return f"seeds={m['seeds']}: a set has from 1 to {MAX_SEEDS} seeds"
    prefix = f"{m['experiment']}-"
    for run_id, digest in m["records"].items():
        if not (RUN_ID.fullmatch(run_id) and run_id.startswith(prefix)):
            return (
                f"record name {run_id!r} is not a run id of {m['experiment']} "
                "(<experiment>-<12 hex digits>, a plain name)"
            )
        if not _is_sha(digest):
            return f"record {run_id}: the digest is not a SHA-256"
    if m["runs"] != len(m["records"]):
        return f"runs={m['runs']} but {len(m['records'])} records are listed"
    if sorted(m["files"]) != sorted([PACKED, TABLE]) or not all(
        _is_sha(d) for d in m["files"].values()
    ):
        return f"files must give the SHA-256 of {PACKED} and {TABLE}"
    if not all(_strings(ids) for ids in m["commits"].values()):
        return "commits must map each commit to a list of run ids"
    committed = [i for ids in m["commits"].values() for i in ids]
    if sorted(committed) != sorted(m["records"]):
        return "commits must name each record exactly once"
    if not (_strings(m["datasets"]) and _strings(m["commands"])):
        return "datasets and commands must be lists of strings"
    hw = m["hardware"]
    if not (
        isinstance(hw.get("device"), str)
        and isinstance(hw.get("cpu_model"), str)
        and isinstance(hw.get("gpu"), (str, type(None)))
    ):
        return "hardware must name the device, the CPU model and the GPU (or null)"
    threads = hw.get("torch_threads")
    if threads is not None and not (
        isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1
    ):
        return "hardware.torch_threads must be a positive int"
    if not _is_sha(m["digest"]):
        return "digest is not a SHA-256"
    return None


def _manifest(folder: Path, data: bytes) -> dict[str, Any]:
    """The checked manifest: strict JSON, the schema, its own digest, and its folder."""
    try:
        manifest = loads(_text(data, MANIFEST), MANIFEST)
    except RecordError as err:
        raise _Refused(MANIFEST, _reason(err, MANIFEST)) from None
    problem = _schema_problem(manifest)
    if problem:
        raise _Refused(MANIFEST, problem)
    if manifest["digest"] != manifest_digest(manifest):
        raise _Refused(MANIFEST, "edited since the set was made (its digest differs)")
    says = f"{manifest['experiment']}/{manifest['profile']}"
    named = f"{folder.parent.name}/{folder.name}"
    if says != named:
        raise _Refused(
            MANIFEST,
            f"is the manifest of {says}, but the set is in the folder {named}",
        )
    return manifest


# ---------------------------------------------------------------- records, grid, table


def _device(name: Any) -> str:
    return str(name).split(":")[0]


def _lines(text: str, at_most: int = -1) -> list[str]:
    """The lines of ``text``, each ended by a newline (the last perhaps not); with
    ``at_most``, the first ``at_most`` and then the rest as one, so a file of many short
    lines costs no more to check than the records the manifest lists."""
    lines = text.split("\n", at_most)
    if lines[-1] == "":
        lines.pop()
    return lines


def _check_records(
    data: bytes, m: dict[str, Any], problems: list[Mismatch]
) -> list[dict[str, Any]]:
    """The records of ``runs.jsonl`` that parse; a problem for each one that does not, or
    that is not listed with its digest, belongs elsewhere, or was made on another device."""
    try:
        text = _text(data, PACKED)
    except _Refused as err:
        problems.append(err.mismatch)
        return []
    device = _device(m["hardware"]["device"])
    lines = _lines(text, len(m["records"]))
    if len(lines) > len(m["records"]):
        problems.append(
            Mismatch(
                PACKED,
                f"has more lines than the {len(m['records'])} records the manifest lists",
            )
        )
    records = []
    for n, line in enumerate(lines, start=1):
        where = f"{PACKED} line {n}"
        try:
            record = parse(line, where)
        except RecordError as err:
            problems.append(Mismatch(where, _reason(err, where)))
            continue
        run_id = record["run_id"]
        listed = m["records"].get(run_id)
        if listed is None:
            problems.append(Mismatch(where, f"{run_id} is not listed in the manifest"))
        elif sha(line) != listed:
            problems.append(
                Mismatch(
                    where,
                    f"{run_id} was edited since the set was made (digest differs)",
                )
            )
        if (record["experiment"], record["profile"]) != (m["experiment"], m["profile"]):
            problems.append(
                Mismatch(where, f"{run_id} belongs to another experiment or profile")
            )
        made_on = _device(record.get("device", "cpu"))
        if made_on != device:
            problems.append(
                Mismatch(
                    where,
                    f"{run_id} was made on {made_on}, but the manifest says "
                    f"{m['hardware']['device']}",
                )
            )
        records.append(record)
    ids = [r["run_id"] for r in records]
    if ids != sorted(set(ids)):
        problems.append(
            Mismatch(PACKED, "its records are not unique and sorted by run id")
        )
    absent = sorted(set(m["records"]) - set(ids))
    if absent:
        problems.append(
            Mismatch(
                PACKED,
                f"lacks {len(absent)} record(s) the manifest lists, e.g. {absent[0]}",
            )
        )
    return records


def _canonical(config: Any) -> str:
    """``config`` as the sorted JSON its run id hashes (:func:`~normlab.experiments.grid.run_id`)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def _config_problem(
    experiment: str, record: dict[str, Any], grid: dict[str, dict[str, Any]]
) -> str | None:
    """Why ``record``'s config is not the one its run id names in its grid, or None: a
    config edited after the run (an arm relabelled, a width or target changed) no longer
    hashes to its id, and one re-hashed to a new id is not a point of the grid."""
    run, config = record["run_id"], record["config"]
    if _run_id(experiment, config) != run:
        return f"{run}: its config does not hash to its run id (edited after the run)"
    own = grid.get(run)
    if own is None:
        return None  # a run outside the grid: _check_grid names it
    differ = sorted(
        k
        for k in set(own) | set(config)
        if _canonical(own.get(k)) != _canonical(config.get(k))
    )
    if differ:
        key = differ[0]
        return (
            f"{run}: its config is not its grid's ({key}={config.get(key)!r}, the grid "
            f"gives {own.get(key)!r})"
        )
    return None


def _check_configs(
    m: dict[str, Any], records: list[dict[str, Any]], problems: list[Mismatch]
) -> None:
    """A problem for each record whose config is not the grid's run of its id (so no
    statistic and no re-run reads a config the grid did not make)."""
    try:
        runs = get_experiment(m["experiment"]).runs(m["profile"], m["seeds"])
    except ValueError:
        return  # _check_grid names the manifest's problem
    grid = {r.run_id: r.config for r in runs}
    for record in records:
        problem = _config_problem(m["experiment"], record, grid)
        if problem:
            problems.append(Mismatch(PACKED, problem))


def _check_grid(
    m: dict[str, Any], ids: list[str], problems: list[Mismatch]
) -> Mismatch | None:
    """Whether the records are the runs of the manifest's grid: a problem for runs outside
    it; returned, not added, when runs are only missing (a sharded save under way)."""
    try:
        grid = {
            r.run_id
            for r in get_experiment(m["experiment"]).runs(m["profile"], m["seeds"])
        }
    except ValueError as err:
        problems.append(Mismatch(MANIFEST, str(err)))
        return None
    missing, extra = sorted(grid - set(ids)), sorted(set(ids) - grid)
    if not (missing or extra):
        return None
    found = Mismatch(
        PACKED,
        f"holds {len(set(ids))} runs, its grid {len(grid)}: {len(missing)} missing "
        f"(e.g. {missing[:1]}), {len(extra)} not in the grid (e.g. {extra[:1]})",
    )
    if extra:
        problems.append(found)
        return None
    return found


def _check_table(data: bytes, records: list[dict[str, Any]]) -> list[Mismatch]:
    """Differences between ``results.csv`` and the table the records make. The header and
    the row count are compared before pandas reads it, so a forged table cannot be wide or
    long enough to exhaust memory."""
    if not records:
        return []  # nothing to compare with: the records' problems say why
    text = records_table(records).to_csv(index=False)
    header = text.split("\n", 1)[0].rstrip("\r").encode()
    if data.split(b"\n", 1)[0].rstrip(b"\r") != header:
        return [Mismatch(TABLE, "its header is not the records' columns")]
    rows = data.rstrip(b"\r\n").count(b"\n")
    if rows != len(records):
        return [Mismatch(TABLE, f"has {rows} rows, {PACKED} {len(records)} records")]
    try:
        table = pd.read_csv(io.BytesIO(data))
    except ValueError as err:
        return [Mismatch(TABLE, f"cannot be read as a table ({err})")]
    expected = pd.read_csv(io.StringIO(text))
    if list(table["run_id"]) != list(expected["run_id"]):
        return [Mismatch(TABLE, "does not list the records' runs in run-id order")]
    problems = []
    for column in expected.columns:
        a, b = expected[column], table[column]
        differ = ~((a == b) | (a.isna() & b.isna()))
        if differ.any():
            first = expected["run_id"][differ].iloc[0]
            problems.append(
                Mismatch(
                    TABLE,
                    f"{column} differs from its record in {int(differ.sum())} row(s), "
                    f"e.g. {first}",
                )
            )
    return problems


class _Checked(NamedTuple):
    """What :func:`_examine` found: the manifest and records (when they could be read),
    every problem, and the grid's missing runs when that is all that is wrong with them."""

    manifest: dict[str, Any] | None
    records: list[dict[str, Any]]
    problems: list[Mismatch]
    missing: Mismatch | None

    def every(self) -> list[Mismatch]:
        """Every problem, the missing runs included."""
        return self.problems + ([self.missing] if self.missing else [])


def _examine(folder: Path, raw: dict[str, bytes]) -> _Checked:
    """Every check of the set made of ``raw`` (its three files' bytes) in ``folder``."""
    try:
        m = _manifest(folder, raw[MANIFEST])
    except _Refused as err:
        return _Checked(None, [], [err.mismatch], None)
    problems = [
        Mismatch(name, "edited since the set was made (digest differs)")
        for name in (PACKED, TABLE)
        if sha(raw[name]) != m["files"][name]
    ]
    records = _check_records(raw[PACKED], m, problems)
    missing = _check_grid(m, [r["run_id"] for r in records], problems)
    _check_configs(m, records, problems)
    problems += _check_table(raw[TABLE], records)
    return _Checked(m, records, problems, missing)


# ------------------------------------------------------------------------- the door


def _located(folder: str | Path) -> tuple[Path, str]:
    """``folder`` made absolute without following links (its name is what it claims to
    be, not where a link points), and its ``experiment/profile``."""
    path = Path(os.path.abspath(folder))
    return path, f"{path.parent.name}/{path.name}"


class Opened(NamedTuple):
    """A set that passed every check: its folder, manifest and the bytes that were checked
    (``records`` already parsed when they were checked just now, else None)."""

    folder: Path
    manifest: dict[str, Any]
    packed: bytes
    table: bytes
    records: list[dict[str, Any]] | None


# (folder, SHA-256 of each file) of every set checked, and the grid's missing runs if any.
_SOUND: dict[tuple[str, ...], Mismatch | None] = {}


def open_set(folder: str | Path, *, partial: bool = False) -> Opened:
    """The set in ``folder`` after every check; a :class:`SetError` if any fails.
    ``partial`` accepts a set that lacks some of its grid's runs (a sharded save under way;
    :func:`normlab.results.pack` returns one), never a run outside it."""
    folder, name = _located(folder)
    raw, refused = _read_all(folder)
    if refused:
        raise SetError(name, refused + _interrupted(folder))
    key = (str(folder), *(sha(raw[f]) for f in LIMITS))
    records = None
    if key in _SOUND:
        manifest = loads(raw[MANIFEST].decode("utf-8"), MANIFEST)
        missing = _SOUND[key]
    else:
        found = _examine(folder, raw)
        if found.problems or found.manifest is None:
            raise SetError(name, found.every() + _interrupted(folder))
        manifest, records, missing = found.manifest, found.records, found.missing
        _SOUND[key] = missing
    if missing is not None and not partial:
        raise SetError(name, [missing])
    return Opened(folder, manifest, raw[PACKED], raw[TABLE], records)


def _interrupted(folder: Path) -> list[Mismatch]:
    """A problem saying that a save stopped part-way, when its staging is in ``folder``."""
    if not os.path.lexists(folder / STAGING):
        return []
    return [
        Mismatch(
            STAGING,
            "a save stopped part-way through replacing the set's files; run the same "
            "save again to finish it",
        )
    ]


def problems(folder: str | Path) -> list[Mismatch]:
    """Every problem of the set in ``folder``, checked afresh (none when it is sound)."""
    folder, _ = _located(folder)
    raw, refused = _read_all(folder)
    if refused:
        return refused + _interrupted(folder)
    found = _examine(folder, raw).every()
    return found + _interrupted(folder) if found else found


def parse_packed(packed: bytes) -> list[dict[str, Any]]:
    """The records of a checked ``runs.jsonl``, in run-id order."""
    return [
        parse(line, f"{PACKED} line {n}")
        for n, line in enumerate(_lines(packed.decode("utf-8")), start=1)
    ]


def previous_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of the set that a save in ``folder`` extends (empty when there is
    none); a :class:`SetError` unless the manifest and ``runs.jsonl`` are intact. Its
    ``results.csv`` is the runner's to rewrite while the save is under way."""
    folder, name = _located(folder)
    if not os.path.lexists(folder / MANIFEST):
        return {}
    try:
        manifest = _manifest(folder, _read(folder, MANIFEST))
        if sha(_read(folder, PACKED)) != manifest["files"][PACKED]:
            raise _Refused(PACKED, "edited since the set was made (digest differs)")
    except _Refused as err:
        raise SetError(name, [err.mismatch]) from None
    return manifest


def renewed(folder: str | Path) -> str:
    """The text of ``folder``'s manifest in :data:`FORMAT`, all else kept (commands,
    commits, ``exact_on``, times, every digest); a :class:`SetError` unless ``runs.jsonl``
    and ``results.csv`` match the old manifest's digests and the renewed set passes every
    check."""
    folder, name = _located(folder)
    raw, refused = _read_all(folder)
    if refused:
        raise SetError(name, refused)
    try:
        old = loads(_text(raw[MANIFEST], MANIFEST), MANIFEST)
    except RecordError as err:
        raise SetError(name, [Mismatch(MANIFEST, _reason(err, MANIFEST))]) from None
    except _Refused as err:
        raise SetError(name, [err.mismatch]) from None
    files = old.get("files") if isinstance(old, dict) else None
    if not isinstance(files, dict):
        raise SetError(name, [Mismatch(MANIFEST, "gives no digests of the files")])
    edited = [
        Mismatch(f, "edited since the set was made (digest differs)")
        for f in (PACKED, TABLE)
        if files.get(f) != sha(raw[f])
    ]
    if edited:
        raise SetError(name, edited)
    text = signed({**old, "format": FORMAT})
    wrong = _examine(folder, {**raw, MANIFEST: text.encode()}).every()
    if wrong:
        raise SetError(name, wrong)
    return text
