"""Steps from functions, with no edit to the program: nsys's Python function trace
(`nsys profile --python-functions-trace=FILE.json`) opens an NVTX range named `MODULE.QUALNAME`
around every call of each function the file names, and those ranges are the steps.

`gapscope profile --step-function MODULE:QUALNAME` names them; with none, the file names the
`forward` of every causal-LM class of the installed transformers (found by reading its
modeling files, nothing imported), so a `model.generate()` loop has its steps (a forward a token,
the prefill's first) wherever the program has no `Step N` ranges of its own.

Before the run a small probe in the program's own Python (`python -c PROBE`, no import of the
program's modules: their files are located and read) says whether each module exists and
whether it defines the name, where transformers lies and whether nvtx (which nsys's function
trace needs in the program's Python) is installed.
"""

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..measures.steps import FORWARD_STEP_PATTERN

FUNCTIONS_FILE = "functions.json"
SPEC = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)$")
# transformers' generating models: `class LlamaForCausalLM(...)`, `class GPT2LMHeadModel(...)`,
# and the encoder-decoders' `class T5ForConditionalGeneration(...)` (generate() calls its forward
# once a decoded token, as a causal LM's).
GENERATING = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
CONDITIONAL = "ForConditionalGeneration"
# The model folders whose ...ForConditionalGeneration forward is traced: the text encoder-
# decoders. Every such forward of transformers 5.17 (147, most of them vision and audio models)
# in one trace file made nsys 2025.3 record no NVTX range at all on the H200, the program's own
# included; the causal LMs with these 18 recorded every forward
# (docs/user-programs-20261202/ftrace/ftrace.log).
ENCODER_DECODERS = frozenset((
    "bart", "bigbird_pegasus", "blenderbot", "blenderbot_small", "fsmt", "led", "longt5",
    "m2m_100", "marian", "mbart", "mt5", "nllb_moe", "pegasus", "pegasus_x", "plbart",
    "prophetnet", "switch_transformers", "t5", "umt5"))
CAUSAL_LM_CLASS = re.compile(r"^class (\w+(?:ForCausalLM|LMHeadModel|ForConditionalGeneration))\(",
                             re.M)
# The end of a class body: the next line that starts in column 0 (a `)` closes its header).
TOP_LEVEL = re.compile(r"^[^\s#)\]]", re.M)
OWN_FORWARD = re.compile(r"^    def forward\(", re.M)
# The NVTX ranges nsys names after those forwards (the analysis finds them by itself too).
FORWARD_PATTERN = FORWARD_STEP_PATTERN
PROBE_TIMEOUT_S = 60


class StepFunctionError(Exception):
    """A --step-function that cannot be traced: one line."""


@dataclass(frozen=True)
class StepFunction:
    module: str
    qualname: str

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.qualname}"

    @property
    def range_name(self) -> str:
        """The NVTX range nsys opens around each call."""
        return f"{self.module}.{self.qualname}"


def parse_spec(value: str) -> StepFunction:
    found = SPEC.match(value)
    if not found:
        raise StepFunctionError(f"--step-function {value!r} is not MODULE:QUALNAME (e.g. "
                                "transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel.forward)")
    module, qualname = found.groups()
    return StepFunction(module, qualname)


def functions_pattern(functions: list) -> str:
    """The step pattern matching exactly the ranges of these functions."""
    names = "|".join(re.escape(f.range_name) for f in functions)
    return f"^(?:{names})$"


def from_range_name(name: str) -> StepFunction:
    """transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel.forward -> that module and
    `GPT2LMHeadModel.forward` (a forward range: class and method are the last two parts)."""
    module, cls, method = name.rsplit(".", 2)
    return StepFunction(module, f"{cls}.{method}")


def trace_config(functions: list) -> list:
    """nsys's function-trace JSON: one entry per module. No domain: the ranges go to NVTX's
    default domain, as the program's own do. `__main__`'s functions are left to the hook (nsys
    cannot trace them: they exist only once the script runs; main_code.py)."""
    by_module = {}
    for f in functions:
        if f.module == "__main__":
            continue
        by_module.setdefault(f.module, []).append(f.qualname)
    return [{"module": m, "functions": q} for m, q in by_module.items()]


def write_config(path: Path, functions: list) -> None:
    path.write_text(json.dumps(trace_config(functions), indent=1) + "\n")


def causal_lm_forwards(transformers_dir: Path) -> list:
    """The forward of every causal-LM class that defines its own, in
    transformers_dir/models/*/modeling_*.py (read, not imported), and of the text
    encoder-decoders' ...ForConditionalGeneration (ENCODER_DECODERS). A class that inherits its
    forward is left out: nsys would wrap the inherited one twice, a range inside a range."""
    return list(_causal_lm_forwards(Path(transformers_dir).resolve()))


@cache
def _causal_lm_forwards(transformers_dir: Path) -> tuple:
    """causal_lm_forwards, read once a process: some 400 files, 0.1 to 0.2 s."""
    found = []
    for path in sorted(Path(transformers_dir).glob("models/*/modeling_*.py")):
        if path.name.startswith(("modeling_tf_", "modeling_flax_")):
            continue
        text = path.read_text(errors="replace")
        if not any(word in text for word in GENERATING):
            continue
        module = f"transformers.models.{path.parent.name}.{path.stem}"
        for match in CAUSAL_LM_CLASS.finditer(text):
            if match.group(1).endswith(CONDITIONAL) and path.parent.name not in ENCODER_DECODERS:
                continue
            header_end = text.find("\n", match.end())
            end = TOP_LEVEL.search(text, header_end + 1) if header_end >= 0 else None
            body = text[header_end:end.start() if end else len(text)]
            if OWN_FORWARD.search(body):
                found.append(StepFunction(module, f"{match.group(1)}.forward"))
    return tuple(found)


# Run by the program's own Python: where each module lies (found without importing it or its
# packages), whether its source defines the name, transformers' folder, and nvtx.
PROBE = r'''
import ast, importlib.machinery, importlib.util, json, sys
args = json.loads(sys.argv[1])
sys.path.insert(0, args["path0"])

def locate(module):
    parts = module.split(".")
    try:
        spec = importlib.machinery.PathFinder.find_spec(parts[0])
        if spec is None and len(parts) == 1:
            spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    for i in range(1, len(parts)):
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(
            ".".join(parts[:i + 1]), list(spec.submodule_search_locations))
    return spec

def bound(body):
    names, dynamic = {}, False
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
            dynamic |= node.name == "__getattr__"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                dynamic |= a.name == "*"
                names.setdefault((a.asname or a.name).split(".")[0], None)
        elif hasattr(node, "body"):  # if, try, with, for, while: their bodies bind too
            subs = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            subs += [s for h in getattr(node, "handlers", []) for s in h.body]
            inner, more = bound(subs)
            for k, v in inner.items():
                names.setdefault(k, v)
            dynamic |= more
        else:
            for target in ast.walk(node):
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    names.setdefault(target.id, None)
    return names, dynamic

def has(origin, qualname):
    # "yes", "no" (the module binds no such name at all) or "unknown" (bound some other way,
    # inherited, or made at run time: only the run can tell).
    if not origin or not origin.endswith(".py"):
        return "unknown"
    try:
        with open(origin, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return "unknown"
    body = tree.body
    for depth, part in enumerate(qualname.split(".")):
        names, dynamic = bound(body)
        if part not in names:
            return "no" if depth == 0 and not dynamic else "unknown"
        node = names[part]
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            return "unknown"
        body = node.body
    return "yes"

out = {"functions": {}, "transformers": None, "nvtx": False, "python": sys.version.split()[0],
       "monitoring": hasattr(sys, "monitoring")}
for spec_text in args["functions"]:
    module, _, qualname = spec_text.partition(":")
    if module == "__main__":
        script = args.get("script")
        out["functions"][spec_text] = ({"module": True, "origin": script,
                                        "name": has(script, qualname)} if script
                                       else {"module": False})
        continue
    spec = locate(module)
    if spec is None:
        out["functions"][spec_text] = {"module": False}
    else:
        out["functions"][spec_text] = {"module": True, "origin": spec.origin,
                                       "name": has(spec.origin, qualname)}
spec = locate("transformers")
if spec is not None and spec.submodule_search_locations:
    out["transformers"] = list(spec.submodule_search_locations)[0]
out["nvtx"] = locate("nvtx") is not None
print(json.dumps(out))
'''


@dataclass(frozen=True)
class Probe:
    """What the probe saw, in the program's Python or (for a command that is not Python) ours."""

    python: str            # the interpreter that looked
    own_python: bool       # it is the program's own (CMD runs Python)
    functions: dict        # "M:Q" -> {"module": bool, "origin": str, "name": yes|no|unknown}
    transformers: str | None
    nvtx: bool
    seconds: float
    version: str | None = None      # the Python that looked
    monitoring: bool = False        # it has sys.monitoring (3.12+): `__main__` can be named


def python_of(cmd: tuple) -> str | None:
    """The Python interpreter CMD runs, where CMD is `python[3[.X]] ...`."""
    return cmd[0] if re.fullmatch(r"python[0-9.]*", Path(cmd[0]).name) else None


def first_path(cmd: tuple, cwd: Path) -> str:
    """What Python puts first on sys.path for CMD: the script's folder, else the working one."""
    args = list(cmd[1:])
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        args.pop(0)
    if args and args[0] not in ("-m", "-c"):
        return str((cwd / args[0]).resolve().parent)
    return str(cwd)


def probe(cmd: tuple, functions: list, cwd: Path, env: dict) -> Probe:
    own = python_of(cmd)
    python = own or sys.executable
    args = json.dumps({"path0": first_path(cmd, cwd) if own else str(cwd),
                       "functions": [f.spec for f in functions],
                       "script": script_file(cmd, cwd) if own else None})
    started = time.perf_counter()
    try:
        done = subprocess.run([python, "-c", PROBE, args], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=PROBE_TIMEOUT_S)
        seen = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        seen = None
    seconds = time.perf_counter() - started
    if seen is None:
        return Probe(python, bool(own), {}, None, False, seconds)
    return Probe(python, bool(own), seen["functions"], seen["transformers"], seen["nvtx"],
                 seconds, seen.get("python"), bool(seen.get("monitoring")))


def monitors(seen: Probe) -> bool:
    """The program's Python can name the script's own functions (sys.monitoring)."""
    return seen.monitoring or not seen.own_python and sys.version_info >= (3, 12)


def script_file(cmd: tuple, cwd: Path) -> str | None:
    """The script `python [opts] SCRIPT` runs (absolute), else None (-m, -c)."""
    args = list(cmd[1:])
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        args.pop(0)
    if not args or args[0] in ("-m", "-c"):
        return None
    return str((cwd / args[0]).resolve())


def check(functions: list, seen: Probe) -> list:
    """Raises StepFunctionError for a function that names nothing: a module whose source binds
    no such name. Returns notes (one line each) for what only the run can tell: a module the
    program's Python cannot find before the run (the program may make it importable)."""
    notes = []
    for f in functions:
        found = seen.functions.get(f.spec)
        if found is None:
            notes.append(f"could not look for {f.spec} before the run ({seen.python} did not "
                         "answer): checked after it")
            continue
        where = "the program's Python" if seen.own_python else f"{seen.python}"
        if not found["module"]:
            # nsys's function trace hooks the import whenever the program makes it: a module on
            # a folder the program puts on sys.path itself is traced all the same.
            why = ("the command is not Python, so its own may differ" if not seen.own_python
                   else "the program may put its folder on sys.path itself")
            notes.append(f"--step-function {f.spec}: no module {f.module} importable by {where} "
                         f"({seen.python}) before the run ({why}): traced, and checked after "
                         "the capture")
            continue
        if found["name"] == "no":
            raise StepFunctionError(f"--step-function {f.spec}: {found['origin']} defines no "
                                    f"{f.qualname.split('.')[0]}")
    return notes
