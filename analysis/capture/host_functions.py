"""The named code of the host table (docs/METRICS.md, "Host time"): the Python functions whose
calls the hook marks in the traced run (an NVTX range each, as nsys's function trace names
them) and times in the untraced twin, found by reading source files, nothing imported:

- generate()'s own work, from the program's transformers: the decode loop (`_sample`), input
  preparation, the model-kwargs update, each logits processor and warper, each stopping
  criterion, the stop check, the cache update, the mask creation, each model's base `forward`;
  and torch's choice of the token (`torch.multinomial`, `torch.argmax`);
- the program's own code is not listed here: the hook names it as the program imports it
  (harness/inject/gapscope_hook/own_code.py: every module from outside the standard library
  and site-packages, at most MAX_OWN_FUNCTIONS functions; the script's own through
  sys.monitoring), which `gapscope profile` turns on with GAPSCOPE_OWN_CODE.

Why the hook and not nsys's `--python-functions-trace` for these (docs/PROFILING.md): nsys's
wrapper calls `sys.audit`, which torch.compile cannot trace, so a traced function inside a
compiled region breaks its graph (and a `fullgraph=True` compile fails); the hook's wrapper
steps aside while dynamo traces (`torch.compiler.is_compiling()`).
"""

import ast
import re
from functools import cache
from pathlib import Path

from ..capture.step_functions import CAUSAL_LM_CLASS, GENERATING, OWN_FORWARD, TOP_LEVEL

CANDIDATES = "transformers.generation.candidate_generator"
# Per file of transformers: the module, and which definitions (class -> methods; "*" any class
# that defines it; None: top-level functions).
TRANSFORMERS = (
    ("generation/utils.py", "transformers.generation.utils",
     {"GenerationMixin": ("generate", "_sample", "_beam_search", "_assisted_decoding", "_prefill",
                          "prepare_inputs_for_generation", "_update_model_kwargs_for_generation",
                          "_has_unfinished_sequences", "_cache_dependant_input_preparation"),
      "*": ("__call__",)}),
    ("generation/logits_process.py", "transformers.generation.logits_process",
     {"*": ("__call__",)}),
    ("generation/stopping_criteria.py", "transformers.generation.stopping_criteria",
     {"*": ("__call__",)}),
    ("generation/candidate_generator.py", CANDIDATES,
     {"*": ("get_candidates", "update_candidate_strategy")}),
    ("cache_utils.py", "transformers.cache_utils", {"*": ("update",)}),
    ("masking_utils.py", "transformers.masking_utils",
     {None: ("create_causal_mask", "create_sliding_window_causal_mask",
             "create_masks_for_generate", "_preprocess_mask_arguments")}),
)
# generate()'s choice of the token, inline in `_sample`: torch's own calls (the hook wraps
# builtins too; TorchScript registers what torch.argmax is when it first scripts, the wrapper).
# Not F.softmax: a Python function, which a scripted caller would compile, wrapper and all.
TORCH = ("torch:multinomial", "torch:argmax")
# A base model: `class LlamaModel(LlamaPreTrainedModel)`, inside a causal LM's forward; an
# encoder-decoder's decoder, run once a token: `class T5Stack(...)`, `class BartDecoder(...)`.
BASE_MODEL_CLASS = re.compile(r"^class (\w+(?:Model|Stack|Decoder))\(", re.M)
# The program's own code: at most this many functions named (the hook's GAPSCOPE_OWN_CODE).
MAX_OWN_FUNCTIONS = 600


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _is_plain(node) -> bool:
    """A def the hook can wrap and time: not async, not a generator, not a property."""
    if not isinstance(node, ast.FunctionDef):
        return False
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)):
        return False
    names = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", None)
             for d in node.decorator_list}
    return not names & {"property", "setter", "getter", "deleter", "cached_property",
                        "overload", "abstractmethod"}


def defined(tree: ast.Module) -> dict:
    """{None: top-level functions, class name: its own methods} of a module."""
    out = {None: set()}
    for node in tree.body:
        if _is_plain(node):
            out[None].add(node.name)
        elif isinstance(node, ast.ClassDef):
            out[node.name] = {n.name for n in node.body if _is_plain(n)}
    return out


@cache
def transformers_functions(transformers_dir: Path) -> tuple:
    """MODULE:QUALNAME of generate()'s own work in this transformers (module docstring)."""
    root = Path(transformers_dir)
    found = []
    for relative, module, wanted in TRANSFORMERS:
        tree = _parse(root / relative)
        if tree is None:
            continue
        have = defined(tree)
        for owner, methods in wanted.items():
            owners = [o for o in have if o is not None] if owner == "*" else [owner]
            for o in owners:
                for m in methods:
                    if m in have.get(o, ()):
                        found.append(f"{module}:{m}" if o is None else f"{module}:{o}.{m}")
    found += base_model_forwards(root)
    return tuple(dict.fromkeys(found))


def base_model_forwards(root: Path) -> list:
    """The base model's own `forward` in each modeling file that has a causal LM."""
    found = []
    for path in sorted(root.glob("models/*/modeling_*.py")):
        if path.name.startswith(("modeling_tf_", "modeling_flax_")):
            continue
        text = path.read_text(errors="replace")
        if not any(word in text for word in GENERATING) or not CAUSAL_LM_CLASS.search(text):
            continue
        module = f"transformers.models.{path.parent.name}.{path.stem}"
        for match in BASE_MODEL_CLASS.finditer(text):
            name = match.group(1)
            # The causal LM's own forward is nsys's to trace (the steps: step_functions.py).
            if name.endswith(("PreTrainedModel", "LMHeadModel")):
                continue
            header_end = text.find("\n", match.end())
            end = TOP_LEVEL.search(text, header_end + 1) if header_end >= 0 else None
            body = text[header_end:end.start() if end else len(text)]
            if OWN_FORWARD.search(body):
                found.append(f"{module}:{name}.forward")
    return found


def script_root(cmd: tuple, cwd: Path) -> tuple:
    """(the folder the program's own modules are found under, the first module to read: its
    file and its dotted name, None for the script itself) for `python [opts] script|-m mod`."""
    args = list(cmd[1:])
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        args.pop(0)
    if not args or args[0] == "-c":
        return cwd, None
    if args[0] == "-m" and len(args) > 1:
        name = args[1]
        base = cwd.joinpath(*name.split("."))
        if base.is_dir():  # a package run with -m: its __main__, inside the package
            return cwd, (base / "__main__.py", f"{name}.__main__")
        return cwd, (base.with_suffix(".py"), name)
    path = (cwd / args[0]).resolve()
    return path.parent, (path, None)


def host_functions(transformers_dir: str | None, extra: tuple, steps: tuple) -> list:
    """Every MODULE:QUALNAME the hook marks and times for the host table by name: generate()'s
    (where the program has transformers), torch's sampling calls, the ones asked for
    (--host-function), less the step functions (their own wrapper times them). The program's
    own code the hook finds by itself (GAPSCOPE_OWN_CODE, module docstring)."""
    found = list(extra)
    if transformers_dir:
        found += transformers_functions(Path(transformers_dir))
    found += list(TORCH)
    return [f for f in dict.fromkeys(found) if f not in set(steps)]


def draft_functions(transformers_dir: str | None) -> list:
    """The draft's work of speculative decoding in this transformers: every candidate
    generator's own get_candidates (GAPSCOPE_STEP_DRAFT: the twin's steps skip the draft's
    forwards, as the analysis does: measures/draft.py)."""
    if not transformers_dir:
        return []
    return [f for f in transformers_functions(Path(transformers_dir))
            if f.startswith(CANDIDATES + ":") and f.endswith(".get_candidates")]
