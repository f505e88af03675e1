"""What every process of this machine opens under a directory tree, as the kernel reports it (Linux inotify).

A read's planning and its tasks run in Spark's Python workers, processes a test cannot patch; the kernel still sees
every directory they list (opendir) and every file they open. `OpenWatch(root)` watches `root` and each directory
below it at the time it starts (inotify watches are not recursive) for IN_OPEN; `opened()` drains the events so far as
paths. A directory opened for listing is reported by its own watch and by its parent's: both give the same path.

Linux only (the project's platform); elsewhere it fails, it does not skip. Imported as `support.open_watch`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

IN_OPEN = 0x00000020
IN_Q_OVERFLOW = 0x00004000
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then `len` bytes of NUL-padded name


class OpenWatch:
    """Watches `root` and the directories below it for opens, until `close()` (also a context manager)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.path.abspath(root)
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if not hasattr(self._libc, "inotify_init1"):
            raise RuntimeError("OpenWatch needs Linux's inotify")
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._directories: dict[int, str] = {}
        self._pending = b""
        for directory, _, _ in os.walk(self.root):
            watch = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), IN_OPEN)
            if watch < 0:
                error = ctypes.get_errno()
                self.close()
                raise OSError(error, f"inotify_add_watch {directory} failed")
            self._directories[watch] = directory
        self.opened()  # os.walk's own listings of the directories watched so far

    def opened(self) -> list[str]:
        """The paths opened since the last call (each directory listing and each file open), in order."""
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            self._pending += chunk
        paths = []
        while len(self._pending) >= _EVENT.size:
            watch, mask, _, length = _EVENT.unpack_from(self._pending)
            if len(self._pending) < _EVENT.size + length:
                break
            name = self._pending[_EVENT.size:_EVENT.size + length].rstrip(b"\0")
            self._pending = self._pending[_EVENT.size + length:]
            if mask & IN_Q_OVERFLOW:
                raise RuntimeError("inotify's event queue overflowed: watch a smaller tree")
            directory = self._directories.get(watch)
            if directory is not None:
                paths.append(os.path.join(directory, os.fsdecode(name)) if name else directory)
        return paths

    def touched(self, depth: int = 1) -> set[str]:
        """The paths under `root`, cut to `depth` components (a table's partition directories: as many as it has
        partition keys), under which anything was opened since the last call; drains the events."""
        found = set()
        for path in self.opened():
            relative = os.path.relpath(path, self.root)
            if relative != "." and not relative.startswith(".."):
                found.add("/".join(relative.split(os.sep)[:depth]))
        return found

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> OpenWatch:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
