"""Integrity-checked downloads into the normlab cache, and the cache folder itself.

Every file is streamed into a hidden partial file beside its destination
(``.<name>.part``), checked against a published checksum, and only then renamed into place:
an interrupted or corrupted download never leaves a file that looks valid. A large file
shows a progress bar on a terminal, survives a stalled connection (``READ_TIMEOUT``) and is
resumed with an HTTP ``Range`` request, within a call or by the next one. Without a
network a download fails within seconds (``TIMEOUT`` to connect) with an
:class:`OfflineError` that says which file to place by hand, where, and which
quick-profile stand-in to use instead.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._runtime import progress_default

DATA_ENV = "NORMLAB_DATA"
TIMEOUT = 3.0  # to connect: an offline machine fails within seconds
READ_TIMEOUT = 60.0  # between two reads of a download under way (files of several GB)
RETRIES = 3  # resumptions of a dropped or stalled connection within one call
CHUNK = 1 << 20


class OfflineError(RuntimeError):
    """A download was needed but the source could not be reached."""


class ChecksumError(RuntimeError):
    """A downloaded file does not match its published checksum (it has been deleted)."""


@dataclass(frozen=True)
class Resource:
    """One downloadable file: where it lives, what it is called and its published checksum.

    ``md5`` or ``sha256`` is required unless ``unpinned`` explains why no checksum is
    published; an unpinned file is still written atomically and then validated by its
    loader's own structure checks.
    """

    url: str
    filename: str
    md5: str | None = None
    sha256: str | None = None
    unpinned: str | None = None

    def __post_init__(self) -> None:
        if self.md5 is None and self.sha256 is None and not self.unpinned:
            raise ValueError(
                f"Resource {self.filename!r} needs md5, sha256 or an `unpinned` reason"
            )


def cache_root(root: str | Path | None = None) -> Path:
    """The data folder: ``root``, else ``$NORMLAB_DATA``, else ``$XDG_CACHE_HOME/normlab``
    (``~/.cache/normlab`` when ``XDG_CACHE_HOME`` is unset)."""
    if root is not None:
        return Path(root).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(xdg) / "normlab"


def file_hash(path: str | Path, algorithm: str) -> str:
    """Hex digest of a file, read in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _pin(resource: Resource) -> tuple[str, str] | None:
    """(algorithm, expected hex digest) of the checksum that pins ``resource``, SHA-256 first;
    None for an unpinned resource."""
    for algorithm, expected in (("sha256", resource.sha256), ("md5", resource.md5)):
        if expected is not None:
            return algorithm, expected.lower()
    return None


def _mismatch(path: Path, resource: Resource) -> tuple[str, str, str] | None:
    """(algorithm, expected, actual) when ``path`` fails its checksum, else None."""
    pin = _pin(resource)
    if pin is None:
        return None
    actual = file_hash(path, pin[0])
    return None if actual == pin[1] else (*pin, actual)


#: The ``standin`` of a real dataset that no offline dataset stands in for at CPU scale.
NO_STAND_IN = ""


def _instead(standin: str) -> str:
    """What to use instead of a real dataset that cannot be read: its offline stand-in, or,
    where it has none (:data:`NO_STAND_IN`), a GPU profile."""
    if standin == NO_STAND_IN:
        return (
            "it has no offline stand-in (none trains like it at CPU scale: "
            "normlab.data.sources.STAND_INS), so its runs need the standard or paper profile"
        )
    return (
        f"or use the quick profile, whose offline stand-in for this dataset is {standin!r} "
        f"(normlab.data.for_profile(task, 'quick'))"
    )


def offline_message(
    resource: Resource, folder: Path, standin: str, reason: object
) -> str:
    return (
        f"This machine is offline (or {resource.url} is unreachable: {reason}). "
        f"Place the file {resource.filename!r} by hand in {folder} (download it from {resource.url} "
        f"on a machine with a network) and call load again; {_instead(standin)}."
    )


def _part_path(folder: Path, resource: Resource) -> Path:
    """Where the bytes received so far wait: a hidden name, never taken for the finished file."""
    return folder / f".{resource.filename}.part"


def _set_read_timeout(response: object, seconds: float) -> None:
    """Give an open HTTP response's socket the read timeout ``seconds`` (best effort: the
    connection was opened with the short ``TIMEOUT``, so that an offline machine fails fast)."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _resumed_from(response: object, offset: int) -> bool:
    """Whether ``response`` answers a ``Range: bytes=offset-`` request with exactly that range."""
    if offset == 0 or getattr(response, "status", None) != 206:
        return False
    content_range = getattr(response, "headers", {}).get("Content-Range", "")
    return content_range.startswith(f"bytes {offset}-")


def _expected_size(response: object, offset: int) -> int | None:
    length = getattr(response, "headers", {}).get("Content-Length")
    return offset + int(length) if length and length.isdigit() else None


def _bar(show: bool, resource: Resource, response: object, offset: int) -> object:
    """A tqdm bar in bytes for the download, or None when ``show`` is False."""
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(
        total=_expected_size(response, offset),
        initial=offset,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=resource.filename,
        leave=False,
    )


def _stream(
    response: object, part: Path, offset: int, read_timeout: float, bar: object
) -> None:
    """Append the body of ``response`` to ``part`` (from its start unless resuming at ``offset``)."""
    if not _resumed_from(response, offset):
        offset = 0  # a fresh file, or a server that ignores ranges: start over
    _set_read_timeout(response, read_timeout)
    # read1 returns what has arrived (up to CHUNK), so a timeout loses no received byte
    read = functools.partial(getattr(response, "read1", response.read), CHUNK)  # type: ignore[attr-defined]
    expected = _expected_size(response, 0)  # this response's body
    received = 0
    with response, open(part, "ab" if offset else "wb") as sink:  # type: ignore[attr-defined]
        for chunk in iter(read, b""):
            sink.write(chunk)
            received += len(chunk)
            if bar is not None:
                bar.update(len(chunk))  # type: ignore[attr-defined]
    if expected is not None and received < expected:  # the server closed early
        raise http.client.IncompleteRead(b"", expected - received)


def _receive(
    resource: Resource,
    folder: Path,
    *,
    standin: str,
    opener: Callable[..., object],
    timeout: float,
    read_timeout: float,
    retries: int,
    show: bool,
) -> None:
    """Fill ``resource``'s partial file in ``folder``, resuming up to ``retries`` times.

    Raises :class:`OfflineError` when the first request cannot connect, or when every
    attempt failed (the bytes received so far are kept for the next call).
    """
    part = _part_path(folder, resource)
    bar = None
    try:
        for attempt in range(retries + 1):
            offset = part.stat().st_size if part.exists() else 0
            headers = {"Range": f"bytes={offset}-"} if offset else {}
            try:
                response = opener(
                    urllib.request.Request(resource.url, headers=headers),
                    timeout=timeout,
                )
            except urllib.error.HTTPError as error:
                if error.code == 416 and offset:  # nothing left to send: check the file
                    return
                failure: BaseException = error
            except (
                urllib.error.URLError,
                TimeoutError,
                ConnectionError,
                OSError,
            ) as error:
                failure = error
            else:
                bar = bar or _bar(show, resource, response, offset)
                try:
                    _stream(response, part, offset, read_timeout, bar)
                    return
                except (
                    TimeoutError,
                    ConnectionError,
                    http.client.IncompleteRead,
                ) as error:
                    failure = error
                    continue
            if attempt == 0:  # never reached: offline
                raise OfflineError(
                    offline_message(resource, folder, standin, failure)
                ) from failure
        kept = part.stat().st_size if part.exists() else 0
        raise OfflineError(
            f"the download of {resource.url} failed {retries + 1} times ({failure}); "
            f"{kept} bytes are kept in {part}, and calling load again resumes from there"
        ) from failure
    finally:
        if bar is not None:
            bar.close()  # type: ignore[attr-defined]


def download(
    resource: Resource,
    folder: str | Path,
    *,
    standin: str,
    opener: Callable[..., object] = urllib.request.urlopen,
    timeout: float = TIMEOUT,
    read_timeout: float = READ_TIMEOUT,
    retries: int = RETRIES,
    progress: bool | None = None,
) -> Path:
    """Download ``resource`` into ``folder`` and return its path, checksum verified.

    The bytes go to ``.<filename>.part`` in ``folder``, which is renamed to ``filename``
    only after the checksum matched. A dropped or stalled connection (no byte for
    ``read_timeout`` seconds) is resumed with an HTTP ``Range`` request up to ``retries``
    times; an interrupted call (Ctrl-C, a lost network) keeps the partial file, and the next
    call resumes from it (starting over when the server ignores ranges). ``progress`` (a
    tqdm bar; None: on a terminal, see :func:`normlab.training.progress_default`).

    Raises :class:`OfflineError` when the URL cannot be reached (within about ``timeout``
    seconds) and :class:`ChecksumError` on a mismatch (the partial file is then deleted).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    part = _part_path(folder, resource)
    pin = _pin(resource)
    _receive(
        resource,
        folder,
        standin=standin,
        opener=opener,
        timeout=timeout,
        read_timeout=read_timeout,
        retries=retries,
        show=progress_default() if progress is None else progress,
    )
    if pin is not None and (actual := file_hash(part, pin[0])) != pin[1]:
        part.unlink()
        raise ChecksumError(
            f"The file downloaded from {resource.url} is corrupted: its {pin[0]} is {actual}, "
            f"expected {pin[1]}. It has been deleted. Call load again to retry; if it fails "
            f"again, download {resource.filename!r} by hand into {folder} and check its {pin[0]}."
        )
    # The checksum is checked before the rename: a bad download never appears under its name.
    target = folder / resource.filename
    os.replace(part, target)
    return target


def ensure_file(
    resource: Resource,
    folder: str | Path,
    *,
    download_ok: bool,
    standin: str,
    verify_existing: bool = False,
) -> Path:
    """Return the path of ``resource`` in ``folder``, downloading it when allowed.

    ``verify_existing`` re-checks the checksum of a file that is already there (a file that
    fails is deleted and an error raised).
    """
    target = Path(folder) / resource.filename
    if target.is_file():
        if verify_existing and (bad := _mismatch(target, resource)) is not None:
            target.unlink()
            raise ChecksumError(
                f"{target} has {bad[0]} {bad[2]}, expected {bad[1]} (the file from {resource.url}); "
                f"it has been deleted. Call load again to download it anew."
            )
        return target
    if not download_ok:
        raise FileNotFoundError(
            f"{target} is missing and download=False. Place {resource.filename!r} from {resource.url} "
            f"in {folder} or call load with download=True; {_instead(standin)}."
        )
    return download(resource, folder, standin=standin)


def _members_inside(names: Iterator[str], destination: Path) -> None:
    base = destination.resolve()
    for name in names:
        if not (base / name).resolve().is_relative_to(base):
            raise ValueError(
                f"archive member {name!r} would be written outside {destination}"
            )


def extract(archive: str | Path, folder: str | Path, produces: str) -> Path:
    """Unpack ``archive`` (tar, tar.gz, zip or a single .gz) so that ``folder/produces``
    appears atomically: everything is unpacked into a temporary folder and ``produces`` is
    renamed into place last."""
    archive, folder = Path(archive), Path(folder)
    target = folder / produces
    staging = Path(tempfile.mkdtemp(prefix=".extract.", dir=folder))
    try:
        name = archive.name
        if name.endswith((".tar", ".tar.gz", ".tgz")):
            with tarfile.open(archive) as tar:
                _members_inside(iter(tar.getnames()), staging)
                tar.extractall(staging, filter="data")
        elif name.endswith(".zip"):
            with zipfile.ZipFile(archive) as bundle:
                _members_inside(iter(bundle.namelist()), staging)
                bundle.extractall(staging)
        elif name.endswith(".gz"):
            with (
                gzip.open(archive, "rb") as source,
                open(staging / produces, "wb") as sink,
            ):
                shutil.copyfileobj(source, sink)
        else:
            raise ValueError(f"do not know how to unpack {archive}")
        if not (staging / produces).exists():
            raise FileNotFoundError(f"{archive} did not contain {produces!r}")
        os.replace(staging / produces, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_extracted(
    resource: Resource,
    folder: str | Path,
    produces: str,
    *,
    download_ok: bool,
    standin: str,
) -> Path:
    """``folder/produces``, first downloaded as ``resource`` (checksum re-checked) and
    extracted (:func:`extract`) when it is not there yet."""
    target = Path(folder) / produces
    if not target.exists():
        archive = ensure_file(
            resource,
            folder,
            download_ok=download_ok,
            standin=standin,
            verify_existing=True,
        )
        extract(archive, folder, produces)
    return target


def check_reachable(
    url: str,
    *,
    resource_name: str,
    folder: Path,
    standin: str,
    timeout: float = TIMEOUT,
) -> None:
    """Raise :class:`OfflineError` quickly when ``url`` cannot be reached.

    Used before handing a download to a third-party fetcher (NLTK, scikit-learn) whose own
    time-outs are long, so that an offline machine fails in seconds with our message.
    """
    request = urllib.request.Request(url, method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # the server answered: we are online
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
        resource = Resource(url=url, filename=resource_name, unpinned="probe only")
        raise OfflineError(offline_message(resource, folder, standin, error)) from error
