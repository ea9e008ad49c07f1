"""How gapscope was installed, for the hints that name a command to run: from a source tree
(a clone, `make install`, `pip install -e .`: the Makefile and scripts/ lie beside the
packages) or from a wheel (`pip install gapscope-*.whl`: the console script alone). A hint
names only what the user has.
"""

import re
from pathlib import Path

# The folder that holds the analysis package: the clone's root in a source tree, site-packages'
# gapscope/ in a wheel.
ROOT = Path(__file__).resolve().parent.parent


def source_tree() -> bool:
    return (ROOT / "Makefile").is_file() and (ROOT / "scripts" / "profile.sh").is_file()


def by_install(source: str, wheel: str) -> str:
    """`source` where gapscope runs from a source tree, else `wheel`."""
    return source if source_tree() else wheel


def version() -> str:
    """`gapscope 0.1.0`, and where it runs from: the installed distribution's version, else
    (a source tree run as `python -m analysis.cli`) pyproject.toml's."""
    from importlib import metadata

    try:
        number = metadata.version("gapscope")
    except metadata.PackageNotFoundError:
        found = re.search(r'^version = "([^"]+)"', _read(ROOT / "pyproject.toml"), re.M)
        number = found.group(1) if found else "unknown"
    where = f"source tree {ROOT}" if source_tree() else f"installed in {ROOT}"
    return f"gapscope {number} ({where})"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
