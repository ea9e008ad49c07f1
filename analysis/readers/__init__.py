"""One reader per kind of capture, each turning its input into the same readers.trace.Trace.

    nsys.py        an Nsight Systems SQLite export (`nsys export --type sqlite`), as it is or
                   compressed (gzip, xz: compressed.py); its GPU ops and launch calls are
                   nsys_ops.py's
    kineto.py      a torch.profiler trace (`prof.export_chrome_trace`, `.json` or `.json.gz`)

`load_trace` picks the reader from the file's content (content.py), not its name: a compressed
stream is looked into, since both an export (`capture.sqlite.gz`, `.xz`) and a torch.profiler
trace come compressed. Anything else goes to the nsys reader, which says in one line what the
file is and what to pass instead.
"""

from pathlib import Path

from ..outputs import check_input
from ..readers import kineto, nsys
from ..readers.content import head, is_json_object, is_sqlite


def is_compressed_export(path: Path) -> bool:
    """A gzip or xz stream whose content starts as a SQLite file does (an nsys export)."""
    try:
        kind, content = head(path)
    except OSError:
        return False
    return kind is not None and is_sqlite(content)


def reader_for(path: Path):
    """The reader module for the file's content: a SQLite file (compressed or not) is the nsys
    reader's, a JSON object (compressed or not) Kineto's, anything else the nsys reader's
    (which names what is wrong with it)."""
    try:
        kind, content = head(path)
    except OSError:
        return nsys  # it says why (missing, unreadable)
    if is_json_object(content):
        return kineto
    return nsys


def load_trace(path, **options):
    path = Path(path)
    check_input(path)  # a FIFO or a device: one line, not a read that hangs
    return reader_for(path).load_trace(path, **options)


__all__ = ["load_trace", "reader_for"]
