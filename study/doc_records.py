"""Generated blocks of the device runs' READMEs under docs/: what each run directory was made
with and what its own records say, read from them (run.json: the command, the twin's runs, the
versions it recorded; report.md and the logs: what the run printed).

host_runs        docs/host-20261202: the two harness runs
programs_1201    docs/user-programs-20261201: each run directory's command, twin and nsys
programs_1202    docs/user-programs-20261202: the same, `unseen/` included
t5_later         docs/user-programs-20261202: the later t5_gen run's steps, top host row, twin
ftrace_check     docs/user-programs-20261202/ftrace: what nsys's function trace recorded
ladder8b_runs    docs/ladder8b-20261202: the versions the session's runs recorded
"""

import json
import re
from pathlib import Path

import pandas as pd

from analysis.toolkit import frame_md_table

from .doc_data import run_line
from .text import listing

UP_1201, UP_1202 = "docs/user-programs-20261201", "docs/user-programs-20261202"
RUN_DIR = re.compile(r"\d{8}T\d{6}Z-")


def run_dirs_in(root: Path, where: str) -> list:
    """The run directories (a run.json under a UTC-stamped name) in `where` and its `unseen/`."""
    base = root / where
    found = [d for d in [*base.iterdir(), *(base / "unseen").glob("*")] if d.is_dir()]
    return sorted((d for d in found if RUN_DIR.match(d.name) and (d / "run.json").is_file()),
                  key=lambda d: str(d.relative_to(base)))


def twin_runs(info: dict) -> str:
    """The untraced twin's runs as run.json's hook records them (`hook.twin.runs`)."""
    twin = (info.get("hook") or {}).get("twin")
    if not twin:
        return "–"
    return str(twin.get("runs")) if twin.get("written") else f"none ({twin.get('why', 'none')})"


def shown(word: str, root: Path) -> str:
    """A word of a recorded command as a clone can read it: a path to a file of the repository
    from its root, any other absolute path by its file name (the machine's own folders, and a
    scratch folder inside the checkout that recorded it, are no path a clone has; the same
    wherever the checkout lies)."""
    if not word.startswith("/"):
        return word
    path = Path(word)
    try:
        inside = path.relative_to(root.resolve())
    except ValueError:
        return f"…/{path.name}"
    return str(inside) if (root / inside).exists() else f"…/{path.name}"


def programs_table(root: Path, where: str) -> str:
    rows = []
    for d in run_dirs_in(root, where):
        info = json.loads((d / "run.json").read_text())
        command = info.get("command")
        command = " ".join(shown(c, root) for c in command) if isinstance(
            command, list) else str(command or "–")
        rows.append({"run directory": f"`{d.relative_to(root / where)}`",
                     "program": f"`{command}`",
                     "twin runs": twin_runs(info),
                     "nsys": (info.get("nsys") or {}).get("version", "–")})
    return ("Each run directory's own run.json: the program gapscope profiled, the untraced "
            "twin's runs (`hook.twin`), the nsys that captured it.\n\n"
            + frame_md_table(pd.DataFrame(rows)))


def programs_1201(root: Path) -> str:
    return programs_table(root, UP_1201)


def programs_1202(root: Path) -> str:
    return programs_table(root, UP_1202)


def host_runs(root: Path) -> str:
    return "\n\n".join(run_line(root, f"docs/host-20261202/{v}") for v in ("static", "kv"))


def md_table(text: str, first_header: str) -> pd.DataFrame:
    """The Markdown table of a report whose header starts `| first_header |`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return pd.DataFrame(rows[2:], columns=rows[0])


T5_LATER = UP_1202 + "/unseen/20261202T160227Z-t5_gen"


def t5_later(root: Path) -> str:
    d = root / T5_LATER
    info = json.loads((d / "run.json").read_text())
    report = (d / "report.md").read_text()
    host = md_table(report, "code").iloc[0]
    twin = re.search(r"^\| untraced steps \(events\) \| (\d+) \|", report, re.M)
    return (f"`{T5_LATER.split('/', 2)[2]}` (its run.json and report.md): "
            f"{info['captured']['steps']} steps, one a decoder forward, "
            f"`{host['code'].rsplit('.', 2)[-2]}.forward` the top host row ({host['share']} of the "
            f"host's time), a twin of {twin[1] if twin else '–'} steps "
            f"({twin_runs(info)} twin run).")


FTRACE = UP_1202 + "/ftrace/ftrace.log"


def ftrace_check(root: Path) -> str:
    """ftrace.log: each set's functions and modules, and what nsys recorded of it."""
    text = (root / FTRACE).read_text()
    sizes = {m[1]: (int(m[2]), int(m[3]))
             for m in re.finditer(r"^(\w+) (\d+) (\d+)$", text, re.M)}
    recorded = dict(re.findall(r"^(\w+) \[\('transformers[^']*forward', (\d+)\)", text, re.M))
    failed = [s for s in sizes if f"{s} rc=0\nTraceback" in text and "no such table: NVTX_EVENTS"
              in text.split(f"{s} rc=0", 1)[1].split(" rc=", 1)[0]]
    extra = sizes["text"][0] - sizes["old"][0]
    return (f"From `{FTRACE}`: with every `…ForConditionalGeneration.forward` of transformers in "
            f"the file (`new`: {sizes['new'][0]} functions in {sizes['new'][1]} modules) nsys "
            "wrote "
            f"{'no NVTX table at all' if 'new' in failed else 'its NVTX table'}; with the causal "
            f"LMs alone (`old`, {sizes['old'][0]}) or with the text encoder-decoders' {extra} "
            "besides (`text`), it recorded "
            + listing([f"{n} forwards (`{s}`)" for s, n in recorded.items()
                       if s in ("old", "text")])
            + ".")


def ladder8b_runs(root: Path) -> str:
    """The versions every run of the session recorded (its captures' and metrics runs' run.json)."""
    base = root / "docs/ladder8b-20261202"
    found: dict = {}
    for run in sorted([*base.glob("study/capture/*/run.json"), *base.glob("metrics/*/run.json")]):
        info = json.loads(run.read_text())
        v = info.get("versions") or {}
        for key, value in (("torch", v.get("torch")), ("driver", v.get("driver")),
                           ("nsys", (info.get("nsys") or {}).get("version"))):
            found.setdefault(key, set()).add(value)
    runs = sum(1 for pattern in ("study/capture/*/run.json", "metrics/*/run.json")
               for _ in base.glob(pattern))
    return (f"The versions its {runs} run directories recorded (each run.json): "
            + listing([f"{k} {' / '.join(sorted(map(str, v)))}" for k, v in found.items()]) + ".")
