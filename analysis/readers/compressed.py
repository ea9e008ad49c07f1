"""nsys exports read as they are stored, compressed (`capture.sqlite.gz`, `capture.sqlite.xz`):
SQLite reads only files, so the export is decompressed once a process into a temporary
directory of its own, read read-only from there and removed at exit; the original is only read.
Every reader of an export goes through `plain(path)`, so a path stays the one the user gave.
"""

import atexit
import gzip
import lzma
import os
import shutil
import tempfile
import threading
import zlib
from pathlib import Path

from ..errors import TraceError

MAGICS = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"))
SQLITE_MAGIC = b"SQLite format 3\x00"
OPENERS = {"gzip": gzip.open, "xz": lzma.open}
DAMAGED = (EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError)

# (resolved path, size, mtime) -> its decompressed copy, for this process.
_COPIES: dict = {}
_TMP: list = []
# Runs are analysed on threads (sweep.open_all): one decompression of a file at a time.
_LOCK = threading.Lock()


def compression(path: Path) -> str | None:
    """"gzip" or "xz" by the file's first bytes (never its name); None for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    return next((name for magic, name in MAGICS if head.startswith(magic)), None)


def head_of(path: Path, kind: str | None, size: int) -> bytes | None:
    """The first `size` bytes of the content: of the decompressed stream where `kind` names a
    compression (None where it cannot be read: damaged, unreadable). OSError for a plain file
    that cannot be read."""
    if kind is None:
        with open(path, "rb") as f:
            return f.read(size)
    try:
        with OPENERS[kind](path, "rb") as f:
            return f.read(size)
    except (OSError, *DAMAGED):
        return None


def holds_sqlite(path: Path, kind: str) -> bool:
    """The compressed stream starts as a SQLite file does (an nsys export, compressed)."""
    return (head_of(path, kind, len(SQLITE_MAGIC)) or b"") == SQLITE_MAGIC


def _scratch() -> Path:
    if not _TMP:
        _TMP.append(Path(tempfile.mkdtemp(prefix="gapscope-exports-")))
        atexit.register(release)
    return _TMP[0]


def release() -> None:
    """Removes the decompressed copies (done at exit; a notebook may call it sooner)."""
    with _LOCK:
        for directory in _TMP:
            shutil.rmtree(directory, ignore_errors=True)
        _TMP.clear()
        _COPIES.clear()


def plain(path: Path) -> Path:
    """path itself where it is not compressed; else its decompressed copy (made once a
    process). TraceError, one line, for a damaged stream or a full disk."""
    kind = compression(path)
    if kind is None:
        return path
    with _LOCK:
        return _copy(path, kind)


def _copy(path: Path, kind: str) -> Path:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    copy = _COPIES.get(key)
    if copy is not None and copy.is_file():
        return copy
    scratch = _scratch()
    fd, name = tempfile.mkstemp(prefix=path.name.split(".")[0] + "-", suffix=".sqlite",
                                dir=scratch)
    copy = Path(name)
    try:
        with OPENERS[kind](path, "rb") as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except DAMAGED as e:
        copy.unlink(missing_ok=True)
        raise TraceError(f"{path}: damaged or truncated {kind} stream ({e}); compress the "
                         "export again, or pass the .sqlite itself") from None
    except OSError as e:
        copy.unlink(missing_ok=True)
        raise TraceError(f"{path}: cannot decompress it into {scratch} ({e.strerror or e}); "
                         f"decompress it yourself and pass the .sqlite") from None
    _COPIES[key] = copy
    return copy
