"""One reader per kind of capture, each turning its input into the same readers.trace.Trace.

    nsys.py        an Nsight Systems SQLite export (`nsys export --type sqlite`), as it is or
                   compressed (gzip, xz: compressed.py); its GPU ops and launch calls are
                   nsys_ops.py's
    kineto.py      a torch.profiler trace (`prof.export_chrome_trace`, `.json` or `.json.gz`)

`load_trace` picks the reader from the file's first bytes, not its name: a compressed stream is
looked into, since both an export (`capture.sqlite.gz`, `.xz`) and a torch.profiler trace come
compressed.
"""

from pathlib import Path

from ..readers import kineto, nsys
from ..readers.compressed import compression, holds_sqlite


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(64)


def is_compressed_export(path: Path) -> bool:
    """A gzip or xz stream whose content starts as a SQLite file does (an nsys export)."""
    kind = compression(path)
    return kind is not None and holds_sqlite(path, kind)


def reader_for(path: Path):
    """The reader module for the file's content: a compressed SQLite file is the nsys reader's,
    other gzip or a JSON object is Kineto's, anything else goes to the nsys reader (which names
    what is wrong with a file that is not SQLite)."""
    try:
        head = _head(path)
    except OSError:
        return nsys  # it says why (missing, unreadable)
    text = head.lstrip()
    if compression(path) == "gzip":
        return nsys if is_compressed_export(path) else kineto
    if text[:1] == b"{" and text[1:].lstrip()[:1] in (b'"', b"}"):
        return kineto
    return nsys


def load_trace(path, **options):
    path = Path(path)
    return reader_for(path).load_trace(path, **options)


__all__ = ["load_trace", "reader_for"]
