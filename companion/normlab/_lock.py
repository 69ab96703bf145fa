"""One process at a time per run: an exclusive lock on a small file, released at exit.

The lock is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on Windows), so
a process that dies, even by SIGKILL, releases it. The file holds the holder's process id,
so that a waiting process can say whom it waits for.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt


class FileLock:
    """An exclusive lock on ``path`` (created, with its folder, if missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def _open(self) -> int:
        for _ in range(10):  # the folder may be removed by another process in between
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                continue
        raise FileNotFoundError(f"cannot create the lock file {self.path}")

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False at once when another holds it.

        A holder may remove the file as it releases it (``release(remove=True)``); a
        process that was waiting on that file then holds a lock nobody else can see, so it
        takes the lock again on the file now at ``path``."""
        while True:
            fd = self._open()
            try:
                if fcntl is not None:
                    flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
                    fcntl.flock(fd, flags)
                else:
                    msvcrt.locking(
                        fd, msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK, 1
                    )
            except OSError:
                os.close(fd)
                if blocking:
                    raise
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
            return self.path.read_text().strip() or "unknown"
        except OSError:
            return "unknown"

    def release(self, *, remove: bool = False) -> None:
        """Give the lock up; ``remove`` deletes the file first (once the guarded work is
        done, so that a process that opens it afterwards finds that work finished)."""
        if self._fd is None:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None
