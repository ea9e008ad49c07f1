"""One reader per kind of capture, each turning its input into the same readers.trace.Trace.

    nsys.py     an Nsight Systems SQLite export (`nsys export --type sqlite`), gzipped or not;
                its GPU ops and their launch calls are nsys_ops.py's
    kineto.py   a torch.profiler trace (`prof.export_chrome_trace`, `.json` or `.json.gz`)

`load_trace` picks the reader from the file's first bytes, not its name: a gzip stream is looked
into, since both an export (`capture.sqlite.gz`) and a torch.profiler trace come gzipped.
"""

import dataclasses
import gzip
import shutil
import tempfile
import zlib
from pathlib import Path

from ..errors import TraceError
from ..readers import kineto, nsys

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(64)


def is_gzipped_export(path: Path) -> bool:
    """A gzip stream whose content starts as a SQLite file does (an nsys export, compressed)."""
    try:
        if not _head(path).startswith(GZIP_MAGIC):
            return False
        with gzip.open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except (OSError, EOFError, zlib.error):
        return False  # the Kineto reader names what is wrong with a damaged gzip


def reader_for(path: Path):
    """The reader module for the file's content: a gzipped SQLite file is the nsys reader's,
    other gzip or a JSON object is Kineto's, anything else goes to the nsys reader (which names
    what is wrong with a file that is not SQLite)."""
    try:
        head = _head(path)
    except OSError:
        return nsys  # it says why (missing, unreadable)
    text = head.lstrip()
    if head.startswith(GZIP_MAGIC):
        return nsys if is_gzipped_export(path) else kineto
    if text[:1] == b"{" and text[1:].lstrip()[:1] in (b'"', b"}"):
        return kineto
    return nsys


def load_gzipped_export(path: Path, **options):
    """An nsys export read as it is, gzipped: SQLite reads only files, so the export is
    decompressed into a temporary directory, read (read-only) and removed; the original is only
    read. The trace and every message name the original path."""
    with tempfile.TemporaryDirectory(prefix="gapscope-") as tmp:
        plain = Path(tmp) / path.name.removesuffix(".gz")
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise TraceError(f"{path}: damaged or truncated gzip ({e}); compress the export "
                             "again, or pass the .sqlite itself") from None
        except OSError as e:
            raise TraceError(f"{path}: cannot decompress it into {tmp} ({e.strerror or e}); "
                             "gunzip it yourself and pass the .sqlite") from None
        try:
            trace = nsys.load_trace(plain, **options)
        except TraceError as e:
            raise TraceError(str(e).replace(str(plain), str(path))) from None
    return dataclasses.replace(trace, path=path)


def load_trace(path, **options):
    path = Path(path)
    if is_gzipped_export(path):
        return load_gzipped_export(path, **options)
    return reader_for(path).load_trace(path, **options)


__all__ = ["load_trace", "reader_for"]
