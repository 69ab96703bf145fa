"""Downloads: checksums enforced, no half-written files, and a fast, clear offline failure.

No test touches the real network: files are served from ``file://`` URLs or a local
``http.server`` on 127.0.0.1, and "offline" is a closed port on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
import time
from pathlib import Path

import normlab.data as data
import pytest
import torchvision.datasets as tvd
from normlab.data import text as text_module
from normlab.data import vision as vision_module
from normlab.data._download import Resource, download, extract

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB: four chunks of the downloader


def closed_port_url(path: str = "") -> str:
    """A URL on 127.0.0.1 at a port nothing listens on (the connection is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/{path}"


def served(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    (source / "blob.bin").write_bytes(PAYLOAD)
    return source / "blob.bin"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_verifies_md5_and_sha256(tmp_path: Path) -> None:
    url = served(tmp_path).as_uri()
    for checksum in (
        {"md5": hashlib.md5(PAYLOAD).hexdigest()},
        {"sha256": hashlib.sha256(PAYLOAD).hexdigest()},
    ):
        folder = tmp_path / next(iter(checksum))
        path = download(
            Resource(url=url, filename="blob.bin", **checksum), folder, standin="digits"
        )
        assert path.read_bytes() == PAYLOAD
        assert leftovers(folder) == ["blob.bin"]


def test_corrupted_download_is_deleted_and_reported(tmp_path: Path) -> None:
    url = served(tmp_path).as_uri()
    wrong = "0" * 32
    folder = tmp_path / "cache"
    with pytest.raises(data.ChecksumError) as caught:
        download(
            Resource(url=url, filename="blob.bin", md5=wrong), folder, standin="digits"
        )
    message = str(caught.value)
    assert (
        url in message
        and wrong in message
        and hashlib.md5(PAYLOAD).hexdigest() in message
    )
    assert "deleted" in message and "again" in message
    assert leftovers(folder) == []


class BrokenStream:
    """A response that delivers one chunk and then fails, like a dropped connection."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.calls = error, 0

    def read(self, size: int) -> bytes:
        self.calls += 1
        if self.calls > 1:
            raise self.error
        return PAYLOAD[:size]

    def __enter__(self) -> BrokenStream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize(
    "error", [ConnectionResetError("peer reset"), KeyboardInterrupt()]
)
def test_interrupted_download_leaves_no_file(
    tmp_path: Path, error: BaseException
) -> None:
    folder = tmp_path / "cache"
    resource = Resource(
        url="http://example.invalid/blob.bin",
        filename="blob.bin",
        md5=hashlib.md5(PAYLOAD).hexdigest(),
    )
    with pytest.raises(type(error)):
        download(
            resource,
            folder,
            standin="digits",
            opener=lambda url, timeout: BrokenStream(error),
        )
    assert leftovers(folder) == []


def test_download_over_local_http_then_extract(tmp_path: Path) -> None:
    """A real HTTP transfer from 127.0.0.1, checksum checked, archive unpacked atomically."""
    import tarfile

    source = tmp_path / "site"
    (source / "inner").mkdir(parents=True)
    (source / "inner" / "a.txt").write_text("hello")
    with tarfile.open(source / "bundle.tar.gz", "w:gz") as tar:
        tar.add(source / "inner", arcname="inner")
    digest = hashlib.md5((source / "bundle.tar.gz").read_bytes()).hexdigest()

    def handler(*args):
        return http.server.SimpleHTTPRequestHandler(*args, directory=str(source))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/bundle.tar.gz"
        folder = tmp_path / "cache"
        archive = download(
            Resource(url=url, filename="bundle.tar.gz", md5=digest),
            folder,
            standin="digits",
        )
        assert (extract(archive, folder, "inner") / "a.txt").read_text() == "hello"
        assert leftovers(folder) == ["bundle.tar.gz", "inner"]
    finally:
        server.shutdown()
        server.server_close()


def assert_offline_error(call, filename: str, standin: str) -> str:
    start = time.perf_counter()
    with pytest.raises(data.OfflineError) as caught:
        call()
    elapsed = time.perf_counter() - start
    message = str(caught.value)
    assert elapsed < 10.0, f"offline failure took {elapsed:.1f} s"
    assert "offline" in message and filename in message and repr(standin) in message
    return message


def test_offline_load_fails_fast_and_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tvd.MNIST, "mirrors", [closed_port_url()])
    message = assert_offline_error(
        lambda: data.load("mnist", "train", root=tmp_path),
        "train-images-idx3-ubyte.gz",
        "digits",
    )
    assert str(tmp_path / "MNIST" / "raw") in message
    assert leftovers(tmp_path / "MNIST" / "raw") == []

    offline_c = Resource(
        url=closed_port_url("CIFAR-10-C.tar"), filename="CIFAR-10-C.tar", md5="0" * 32
    )
    monkeypatch.setattr(vision_module, "CIFAR10_C", offline_c)
    assert_offline_error(
        lambda: data.load("cifar10_c", "test", root=tmp_path),
        "CIFAR-10-C.tar",
        "shapes_diverse_c",
    )

    offline_sst = Resource(
        url=closed_port_url("SST-2.zip"), filename="SST-2.zip", sha256="0" * 64
    )
    monkeypatch.setattr(text_module, "SST2", offline_sst)
    assert_offline_error(
        lambda: data.load("sst2", "train", root=tmp_path),
        "SST-2.zip",
        "sentiment_grammar",
    )


def test_offline_third_party_fetchers_fail_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NLTK's and scikit-learn's downloaders are guarded by a quick reachability probe."""
    import sklearn.datasets._california_housing as california

    monkeypatch.delenv("NORMLAB_PTB_WSJ", raising=False)
    monkeypatch.setattr(text_module, "TREEBANK_URL", closed_port_url("treebank.zip"))
    assert_offline_error(
        lambda: data.load("ptb_pos", "train", root=tmp_path),
        "treebank.zip",
        "pos_grammar",
    )

    monkeypatch.setattr(
        california,
        "ARCHIVE",
        california.ARCHIVE._replace(url=closed_port_url("cal_housing.tgz")),
    )
    assert_offline_error(
        lambda: data.load("california_housing", "train", root=tmp_path),
        "cal_housing_py3.pkz",
        "diabetes",
    )


def test_offline_message_says_where_to_place_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        vision_module,
        "CIFAR10_C",
        Resource(url=closed_port_url("c.tar"), filename="CIFAR-10-C.tar", md5="0" * 32),
    )
    with pytest.raises(data.OfflineError, match="by hand") as caught:
        data.load("cifar10_c", "test", root=tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_resource_needs_a_checksum_or_a_reason() -> None:
    with pytest.raises(ValueError, match="md5, sha256"):
        Resource(url="file:///x", filename="x")
