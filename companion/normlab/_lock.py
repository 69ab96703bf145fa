"""One process at a time per run: an exclusive lock on a small file, released at exit.

The lock is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on Windows), so
a process that dies, even by SIGKILL, releases it. The file holds the holder's process id,
so that a waiting process can say whom it waits for; a wait with a ``timeout`` gives up
after it with a :class:`LockError` naming that process. A lock file that is a symbolic link
(or anything but a regular file) is refused, never followed: writing the process id would
overwrite the link's target.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt


# O_NOFOLLOW: a link at the lock's path is refused (ELOOP), not followed; O_NONBLOCK: a
# named pipe put there does not block the open.
_FLAGS = (
    os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
)


class LockError(OSError):
    """A lock that cannot be taken: its file is not a regular file, or its holder kept it
    past the wait's timeout."""


class FileLock:
    """An exclusive lock on ``path`` (created, with its folder, if missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def _open(self) -> int:
        for _ in range(10):  # the folder may be removed by another process in between
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if os.path.islink(self.path):
                raise LockError(self._not_a_file("a symbolic link"))
            try:
                fd = os.open(self.path, _FLAGS, 0o644)
            except FileNotFoundError:
                continue
            except OSError as err:
                raise LockError(self._not_a_file(err.strerror or str(err))) from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise LockError(self._not_a_file("not a regular file"))
            return fd
        raise FileNotFoundError(f"cannot create the lock file {self.path}")

    def _not_a_file(self, what: str) -> str:
        return (
            f"the lock file {self.path} is {what}; a lock must be a regular file (remove "
            "it, and run again)"
        )

    def _lock(self, fd: int, blocking: bool) -> bool:
        """Lock ``fd``; False when another holds it and ``blocking`` is False."""
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            else:
                msvcrt.locking(fd, msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK, 1)
        except OSError:
            if blocking:
                raise
            return False
        return True

    def wait(self, timeout: float, *, doing: str) -> None:
        """Take the lock, waiting at most ``timeout`` seconds for its holder (named on
        stderr, as what it is ``doing``); then a :class:`LockError` naming the holder."""
        if self.acquire(blocking=False):
            return
        holder = self.holder()
        print(
            f"waiting for process {holder}, which is {doing} (giving up after "
            f"{timeout:g} s)",
            file=sys.stderr,
            flush=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))
            if self.acquire(blocking=False):
                return
        raise LockError(
            f"gave up after {timeout:g} s waiting for process {self.holder()}, which "
            f"holds {self.path} ({doing}); if that process is stopped or hung, end it "
            "(or remove the lock file once it has ended), and run again"
        )

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False at once when another holds it.

        A holder may remove the file as it releases it (``release(remove=True)``); a
        process that was waiting on that file then holds a lock nobody else can see, so it
        takes the lock again on the file now at ``path``."""
        while True:
            fd = self._open()
            try:
                locked = self._lock(fd, blocking)
            except OSError:
                os.close(fd)
                raise
            if not locked:
                os.close(fd)
                return False
            if fcntl is None or self._still_at_path(fd):
                break
            os.close(fd)  # removed while we waited: lock the file now at the path
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def _still_at_path(self, fd: int) -> bool:
        """Whether the locked descriptor ``fd`` is the file now at :attr:`path`."""
        try:
            here = os.stat(self.path)
        except FileNotFoundError:
            return False
        locked = os.fstat(fd)
        return (locked.st_ino, locked.st_dev) == (here.st_ino, here.st_dev)

    def holder(self) -> str:
        """The process id written by the holder, or ``"unknown"``."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return "unknown"
        try:
            text = os.read(fd, 32).decode("ascii", "replace").strip()
        except OSError:
            text = ""
        finally:
            os.close(fd)
        return text if text.isdigit() else "unknown"

    def release(self, *, remove: bool = False) -> None:
        """Give the lock up; ``remove`` deletes the file first (once the guarded work is
        done, so that a process that opens it afterwards finds that work finished)."""
        if self._fd is None:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None
