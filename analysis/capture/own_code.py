"""The program's own code as the traced run's hook named it (its own_code.py wrote
RUN/own_code-PID.json, one a process): what run.json says of it, and, where the steps were
inferred, the function of it that runs once a step (measures/step_function.py), whose calls are
then the steps."""

import json
from pathlib import Path

from ..capture import step_functions as sf
from ..errors import TraceError
from ..measures.step_function import candidates_table, once_a_step
from ..measures.steps import INFER, step_ranges
from ..readers import load_trace

FILES = "own_code-*.json"


def read(run: Path) -> dict | None:
    """The traced run's processes' records merged: limit, modules, functions (MODULE:QUALNAME),
    left_out, capped_at, main ({named, why, functions}); None where the hook wrote none."""
    out = None
    for path in sorted(Path(run).glob(FILES)):
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(doc, dict):
            continue
        if out is None:
            out = {"limit": doc.get("limit"), "modules": {}, "functions": [], "left_out": 0,
                   "capped_at": None, "main": {"named": False, "why": None, "functions": []}}
        out["modules"] |= doc.get("modules") or {}
        out["functions"] += [f for f in doc.get("functions") or [] if f not in out["functions"]]
        out["left_out"] = max(out["left_out"], doc.get("left_out") or 0)
        out["capped_at"] = out["capped_at"] or doc.get("capped_at")
        main = doc.get("main") or {}
        if main.get("named"):
            out["main"]["named"] = True
        out["main"]["why"] = out["main"]["why"] or main.get("why")
        out["main"]["functions"] += [q for q in main.get("functions") or []
                                     if q not in out["main"]["functions"]]
    return out


def summary(record: dict | None) -> dict | None:
    """run.json's `hook.own_code`: counts, the cap where it bit, why `__main__` was not named."""
    if record is None:
        return None
    main = record["main"]
    return {"modules": len(record["modules"]), "functions": len(record["functions"]),
            "limit": record["limit"], "left_out": record["left_out"],
            "capped_at": record["capped_at"],
            "main_functions": len(main["functions"]) if main["named"] else 0,
            "main_why": main["why"]}


def specs_by_range(record: dict) -> dict:
    """The NVTX range each named function opens -> its MODULE:QUALNAME."""
    specs = [*record["functions"], *(f"__main__:{q}" for q in record["main"]["functions"]
                                       if record["main"]["named"])]
    return {sf.parse_spec(spec).range_name: spec for spec in specs}


def own_step(sqlite: Path, record: dict | None) -> tuple:
    """(the MODULE:QUALNAME whose calls are the steps, why in a few words) for a capture whose
    steps are inferred; (None, why not)."""
    if record is None:
        return None, "the hook named none of the program's own code"
    specs = specs_by_range(record)
    if not specs:
        return None, "the hook named none of the program's own code"
    try:
        trace = load_trace(sqlite)
        steps, _ = step_ranges(trace, INFER)
    except TraceError as e:
        return None, f"no steps inferred ({e})"
    table = candidates_table(trace, steps, list(specs))
    chosen = once_a_step(table)
    if chosen is None:
        return None, "none of the program's own functions runs once a step"
    row = table[table["name"] == chosen].iloc[0]
    return specs[chosen], (f"{row['calls']} calls for {row['steps']} inferred steps, "
                           f"{row['cover']:.0%} of their launches inside")
