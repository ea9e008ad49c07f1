"""One reader per kind of capture, each turning its input into the same analysis.trace.Trace.

    nsys.py     an Nsight Systems SQLite export (`nsys export --type sqlite`)
    kineto.py   a torch.profiler trace (`prof.export_chrome_trace`, `.json` or `.json.gz`)

`load_trace` picks the reader from the file's first bytes, not its name.
"""

from pathlib import Path

from analysis.readers import kineto, nsys

GZIP_MAGIC = b"\x1f\x8b"


def reader_for(path: Path):
    """The reader module for the file's content: gzip or a JSON object is Kineto's, anything
    else goes to the nsys reader (which names what is wrong with a file that is not SQLite)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return nsys  # it says why (missing, unreadable)
    text = head.lstrip()
    if head.startswith(GZIP_MAGIC) or (text[:1] == b"{" and text[1:].lstrip()[:1] in (b'"', b"}")):
        return kineto
    return nsys


def load_trace(path, **options):
    path = Path(path)
    return reader_for(path).load_trace(path, **options)


__all__ = ["load_trace", "reader_for"]
