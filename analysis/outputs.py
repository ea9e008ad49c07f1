"""Where the analysis writes, checked before any work, and how (docs/ANALYSIS.md, "Outputs").

An output path is refused in one line (TraceError; the console script's exit status 2) where it
  - is, resolves to, or links to (a symbolic or a hard link) an input of the same command;
  - exists and the caller did not say to replace it (`--force`; `overwrite=True` in the library);
  - is a folder or no regular file, or its folder is missing or cannot be written in;
  - ends in an extension that names no format the output is written in (FORMATS).
An input that is neither a regular file nor a folder (a FIFO, /dev/null, a device, a socket)
is refused at once: reading one would hang or read nothing.

A file is written whole or not at all: into a temporary file beside it, renamed over the path
once complete (an interrupted write leaves the earlier file as it was).

Imports nothing of pandas or matplotlib: the console script checks its outputs first.
"""

import os
import stat
from pathlib import Path

from .errors import TraceError

# The formats each output is written in, by the extension of its path (lower case).
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
PERFETTO_FORMATS = {".json": "json", ".json.gz": "json.gz"}
DB_FORMATS = {".db": "sqlite", ".sqlite": "sqlite", ".sqlite3": "sqlite"}
CSV_FORMATS = {".csv": "csv"}

# The files of a run directory the analysis reads, or that belong to the capture (never an
# output, even with --force).
RUN_FILES = ("capture.sqlite", "capture.sqlite.xz", "capture.sqlite.gz", "capture.nsys-rep",
             "kineto.json.gz", "kineto.json", "run.json", "untraced.json", "untraced_steps.json",
             "nsys.log")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "no regular file"


def check_input(path, what: str = "a capture: pass a trace file or a run directory") -> None:
    """A path an input is read from: a regular file or a folder (symbolic links followed), else
    one line (`what` it should be); a missing path is left to the reader (it says so itself)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise TraceError(f"{path}: {_kind(mode)}, not {what}")


def input_files(path) -> list:
    """The files an input argument stands for: the file itself, or the run directory's own
    files (RUN_FILES, and any .sqlite in it); a folder of runs: those of every run under it."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    found = []
    for here, subdirs, files in os.walk(path, followlinks=True):
        here = Path(here)
        found += [here / f for f in files if f in RUN_FILES or f.endswith(
            (".sqlite", ".sqlite.gz", ".sqlite.xz", ".json.gz"))]
        subdirs.sort()
    return found


def same_file(a, b) -> bool:
    """One file by two names: the same inode (a hard or symbolic link), or the same resolved
    path (where either does not exist yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def format_of(path, formats: dict, what: str) -> str:
    """The format `path`'s extension names, of `formats`; else one line."""
    name = Path(path).name.lower()
    for ext in sorted(formats, key=len, reverse=True):
        if name.endswith(ext) and len(name) > len(ext):
            return formats[ext]
    said = ", ".join(formats)
    raise TraceError(f"{what} {path}: the extension names no format it writes; end the name in "
                     f"{said}")


def check_output(path, what: str, inputs=(), *, replace: bool = False,
                 replace_how: str = "--force", formats: dict | None = None,
                 kept: bool = False) -> Path:
    """The output path, checked: not an input, not a folder, its format known (`formats`: by
    extension), its folder there and writable, and where it exists, replaced only if `replace`
    (`replace_how` says how to ask for it), or kept and added to (`kept`: a database).
    `inputs`: the files the command reads (input_files of each argument). `what`: the option
    or argument, for the message (`--plot`, `plot(path)`)."""
    path = Path(path)
    for source in inputs:
        if same_file(path, source):
            same = "" if Path(source) == path else f" ({source})"
            raise TraceError(f"{what} {path}: is an input{same}; writing it would destroy the "
                             "capture: name another file")
    if path.name in RUN_FILES and path.parent.joinpath("run.json").is_file():
        raise TraceError(f"{what} {path}: a run directory's own file; name another file")
    if path.is_dir():
        raise TraceError(f"{what} {path}: is a folder; name a file in it")
    if formats is not None:
        format_of(path, formats, what)
    if os.path.lexists(path):
        mode = os.stat(path).st_mode if path.exists() else 0
        if path.exists() and not stat.S_ISREG(mode):
            raise TraceError(f"{what} {path}: {_kind(mode)}; name a regular file")
        if not (replace or kept):
            raise TraceError(f"{what} {path}: exists; {replace_how} replaces it")
    folder = path.parent
    if not folder.is_dir():
        raise TraceError(f"{what} {path}: no folder {folder} to write it in")
    if not os.access(folder, os.W_OK):
        raise TraceError(f"{what} {path}: cannot write in {folder}")
    return path


def check_stdout(inputs) -> None:
    """Standard output redirected into an input (`analyze x.sqlite >> x.sqlite`): one line
    before anything is printed (with `>` the shell has emptied it already)."""
    try:
        out = os.fstat(1)
    except OSError:
        return
    if not stat.S_ISREG(out.st_mode):
        return
    for source in inputs:
        try:
            st = os.stat(source)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            raise TraceError(f"standard output is {source}, an input: printing into it would "
                             "destroy the capture; redirect it to another file")


def write_atomic(path, write) -> Path:
    """write(tmp) into a temporary file beside `path`, then renamed over it: the path holds the
    whole output or what it held before. A failure to write is one line."""
    path = Path(path)
    # The same extension: a writer that goes by it (matplotlib, gzip) writes the same format.
    tmp = path.with_name(f".{os.getpid()}-tmp-{path.name}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise TraceError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


SQLITE_HEADER = b"SQLite format 3\x00"


def check_database(path, what: str, inputs=()) -> Path:
    """A results database to add runs to: not an input, named .db/.sqlite/.sqlite3, and where it
    exists, one gapscope wrote (an empty file, or SQLite with a `runs` table): never another
    SQLite file (an nsys export not among the inputs) that gapscope's tables would be written
    into."""
    import sqlite3

    path = check_output(path, what, inputs, kept=True, formats=DB_FORMATS)
    if not path.is_file() or path.stat().st_size == 0:
        return path
    with open(path, "rb") as f:
        if f.read(16) != SQLITE_HEADER:
            raise TraceError(f"{what} {path}: not a SQLite file (a results database is one: name "
                             "a new file, or one gapscope wrote)")
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise TraceError(f"{what} {path}: cannot read it ({e})") from None
    if tables and "runs" not in tables:
        raise TraceError(f"{what} {path}: a SQLite file but no gapscope results database (no "
                         "runs table; an nsys export?): name a new file")
    return path


# Bytes 18 and 19 of a SQLite header: the write and read versions, 2 in WAL mode.
WAL_VERSION = 2


def readonly_uri(path: Path) -> str:
    """A read-only URI of a SQLite file that leaves its folder as it is: a file whose header
    says WAL mode (nsys writes none; a damaged header can read so) is opened immutable, since
    even a read-only connection makes `-wal` and `-shm` files beside it otherwise."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return uri
    return uri + "&immutable=1" if WAL_VERSION in header[18:20] else uri
