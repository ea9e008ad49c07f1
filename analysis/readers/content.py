"""What a file holds, by its first bytes (never its name), looking into a gzip or xz stream: the
readers' choice (readers/__init__.py) and, for a file no reader reads, the one line that says
what it is and how to make one that can be read.

    b"SQLite format 3\\0"        an nsys export           the nsys reader
    b"{" then '"' or "}"         a JSON object            the Kineto reader
    b"NVIDIA Tegra Profiler"     an .nsys-rep             its export is read, not it
    b"["                         a JSON list              not a torch.profiler trace
    b""                          empty                    cut short?
"""

from pathlib import Path

from ..readers.compressed import SQLITE_MAGIC, compression, head_of

NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"
BOTH_FIX = ("export the .nsys-rep with `nsys export --type sqlite`, or a torch.profiler "
            "trace with prof.export_chrome_trace(PATH)")
HEAD = 64


def head(path: Path) -> tuple:
    """(its compression or None, the first bytes of its content: decompressed where it is
    compressed, None where the stream cannot be read)."""
    kind = compression(path)
    return kind, head_of(path, kind, HEAD)


def is_sqlite(content: bytes | None) -> bool:
    return content is not None and content.startswith(SQLITE_MAGIC)


def is_json_object(content: bytes | None) -> bool:
    text = (content or b"").lstrip()
    return text[:1] == b"{" and text[1:].lstrip()[:1] in (b'"', b"}")


def not_a_capture(path: Path, kind: str | None, content: bytes | None) -> str:
    """The one line (after the path) for a file that is neither an nsys SQLite export nor a
    torch.profiler trace."""
    inside = f"{'an' if kind == 'xz' else 'a'} {kind} file holding " if kind else ""
    if content is not None and content.startswith(NSYS_REP_MAGIC):
        export = path.with_name(path.name.removesuffix(".nsys-rep") + ".sqlite")
        return (f"{inside}an Nsight Systems report (.nsys-rep), which gapscope reads through its "
                f"SQLite export: `nsys export --type sqlite -o {export} {path}` (`gapscope "
                "profile` exports its own)")
    if content == b"":
        what = f"{inside}nothing" if inside else "empty file"
        return f"{what} (a capture cut short?); {_fix(path)}"
    if (content or b"").lstrip()[:1] == b"[":
        return (f"{inside}a JSON list, not a torch.profiler trace (a JSON object with a "
                f"traceEvents list); {BOTH_FIX}")
    return f"{inside}neither an nsys SQLite export nor a torch.profiler trace (JSON); {BOTH_FIX}"


def _fix(path: Path) -> str:
    """The fix the name suggests, where it suggests one."""
    name = path.name.lower()
    if ".json" in name:
        return "export the trace again with prof.export_chrome_trace(PATH)"
    if ".sqlite" in name:
        return "export the .nsys-rep again with `nsys export --type sqlite`"
    return BOTH_FIX
