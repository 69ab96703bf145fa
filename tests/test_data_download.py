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
    ("error", "raised"),
    [
        (ConnectionResetError("peer reset"), data.OfflineError),
        (KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
def test_interrupted_download_leaves_only_a_hidden_partial_file(
    tmp_path: Path, error: BaseException, raised: type
) -> None:
    folder = tmp_path / "cache"
    resource = Resource(
        url="http://example.invalid/blob.bin",
        filename="blob.bin",
        md5=hashlib.md5(PAYLOAD).hexdigest(),
    )
    with pytest.raises(raised) as caught:
        download(
            resource,
            folder,
            standin="digits",
            opener=lambda url, timeout: BrokenStream(error),
            progress=False,
        )
    if raised is data.OfflineError:  # retried, then the kept bytes are named
        assert "failed 4 times" in str(caught.value)
        assert "resumes" in str(caught.value)
    assert leftovers(folder) == [".blob.bin.part"]  # never under the file's own name


class RangeServer:
    """A loopback HTTP server for PAYLOAD that honours ``Range`` and misbehaves on request:
    ``drop``: requests that send half their bytes then close; ``stall``: requests that
    send half, wait ``stall_s`` and finish; ``ranges=False`` ignores Range headers."""

    def __init__(self, *, drop: int = 0, stall: int = 0, stall_s: float = 0.0) -> None:
        self.drop, self.stall, self.stall_s, self.ranges = drop, stall, stall_s, True
        self.requests: list[str | None] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                wanted = self.headers.get("Range")
                outer.requests.append(wanted)
                start = 0
                if wanted and outer.ranges:
                    start = int(wanted.removeprefix("bytes=").rstrip("-"))
                    self.send_response(206)
                    end = len(PAYLOAD) - 1
                    self.send_header(
                        "Content-Range", f"bytes {start}-{end}/{len(PAYLOAD)}"
                    )
                else:
                    self.send_response(200)
                body = PAYLOAD[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                half = len(body) // 2
                if outer.drop > 0:
                    outer.drop -= 1
                    self.wfile.write(body[:half])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if outer.stall > 0:
                    outer.stall -= 1
                    self.wfile.write(body[:half])
                    self.wfile.flush()
                    time.sleep(outer.stall_s)
                    self.wfile.write(body[half:])
                    return
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/blob.bin"

    def __enter__(self) -> RangeServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _blob(url: str) -> Resource:
    return Resource(
        url=url, filename="blob.bin", sha256=hashlib.sha256(PAYLOAD).hexdigest()
    )


def test_a_dropped_connection_is_resumed_with_a_range_request(tmp_path: Path) -> None:
    with RangeServer(drop=1) as server:
        path = download(_blob(server.url), tmp_path, standin="digits", progress=False)
    assert path.read_bytes() == PAYLOAD and leftovers(tmp_path) == ["blob.bin"]
    assert server.requests == [None, f"bytes={len(PAYLOAD) // 2}-"]


def test_the_next_call_resumes_a_partial_file(tmp_path: Path) -> None:
    with RangeServer(drop=1) as server:
        with pytest.raises(data.OfflineError, match="bytes are kept in .*resumes"):
            download(
                _blob(server.url), tmp_path, standin="digits", retries=0, progress=False
            )
        assert leftovers(tmp_path) == [".blob.bin.part"]
        path = download(_blob(server.url), tmp_path, standin="digits", progress=False)
    assert path.read_bytes() == PAYLOAD and leftovers(tmp_path) == ["blob.bin"]
    assert server.requests[-1] == f"bytes={len(PAYLOAD) // 2}-"


def test_a_server_without_ranges_starts_over_and_stays_correct(tmp_path: Path) -> None:
    with RangeServer(drop=1) as server:
        server.ranges = False
        path = download(_blob(server.url), tmp_path, standin="digits", progress=False)
    assert path.read_bytes() == PAYLOAD
    assert len(server.requests) == 2


def test_a_stalled_read_times_out_and_resumes(tmp_path: Path) -> None:
    """The read timeout, not the 3 s connect timeout, governs a download under way."""
    with RangeServer(stall=1, stall_s=2.0) as server:
        path = download(
            _blob(server.url),
            tmp_path,
            standin="digits",
            read_timeout=0.3,
            progress=False,
        )
    assert path.read_bytes() == PAYLOAD
    assert server.requests == [None, f"bytes={len(PAYLOAD) // 2}-"]


def test_a_corrupt_resumed_file_is_deleted(tmp_path: Path) -> None:
    (tmp_path / ".blob.bin.part").write_bytes(
        b"x" * 1000
    )  # not the payload's first bytes
    with RangeServer() as server:
        with pytest.raises(data.ChecksumError, match="deleted"):
            download(_blob(server.url), tmp_path, standin="digits", progress=False)
    assert leftovers(tmp_path) == []


def test_a_download_shows_progress_in_bytes(tmp_path: Path, capsys) -> None:
    with RangeServer() as server:
        download(_blob(server.url), tmp_path, standin="digits", progress=True)
    err = capsys.readouterr().err
    assert "blob.bin" in err and "1.00M" in err


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


def assert_offline_error(call, filename: str, standin: str | None) -> str:
    start = time.perf_counter()
    with pytest.raises(data.OfflineError) as caught:
        call()
    elapsed = time.perf_counter() - start
    message = str(caught.value)
    assert elapsed < 10.0, f"offline failure took {elapsed:.1f} s"
    assert "offline" in message and filename in message
    assert standin is None or repr(standin) in message
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
    message = assert_offline_error(
        lambda: data.load("cifar10_c", "test", root=tmp_path),
        "CIFAR-10-C.tar",
        None,
    )
    # no offline dataset stands in for it: the message says so, and names the table
    assert "no offline stand-in" in message and "STAND_INS" in message

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
