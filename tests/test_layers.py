"""The house's layers: no package imports one that imports it back, no module one that imports it
back, the pipeline's order holds, and no module is over 400 lines.

Every import in analysis/, harness/, scripts/ and study/ is read from the source (ast:
function-level imports too, and the module strings of the CLI's lazy commands and the study's
block registry), each resolved to its unit: a sub-package of analysis (readers, measures, render,
store, capture, cli), a top-level module of analysis (errors, api, sweep), harness, scripts or
the study (the project's own, beside the library). The units' graph must have no cycle, and
neither must the graph of the modules themselves (inside a sub-package too). The hook
(harness/inject/) runs inside the user's program under names of its own (`sitecustomize`, its
package): its modules are a graph of their own.
"""

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("analysis", "harness", "scripts", "study")
INJECT = ROOT / "harness" / "inject"
MAX_LINES = 400


def unit(module: str) -> str | None:
    """The unit a dotted module name belongs to, None outside the house's packages."""
    parts = module.split(".")
    if parts[0] == "gapscope":
        parts = parts[1:]
    if not parts or parts[0] not in PACKAGES:
        return None
    if parts[0] in ("harness", "scripts", "study") or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, root: Path = ROOT) -> set:
    """The dotted names a module imports, relative imports resolved, lazy ones included: for
    `from M import n`, both M and M.n (n may be a module or a name in M)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found |= {f"{module}.{a.name}" for a in node.names} | {module}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # "analysis.capture.doctor:doctor": a command imported by name when used
            head = node.value.split(":")[0]
            if ":" in node.value and head.replace(".", "").replace("_", "").isalnum():
                found.add(head)
    return found


def sources() -> list:
    """(module file, the root its name is relative to) of every module: analysis/, harness/ and
    scripts/ from the repository root, the hook's from harness/inject/."""
    found = [(p, INJECT) for p in INJECT.rglob("*.py")]
    for package in PACKAGES:
        found += [(p, ROOT) for p in (ROOT / package).rglob("*.py")
                  if INJECT not in p.parents]
    return sorted(found)


def resolved(path: Path, root: Path, names: set) -> set:
    """The modules of `names` a module imports, each import statement resolved to the module it
    reads: `from M import n` is M.n where that is a module, else M; `import a.b.c` the longest
    of a.b.c, a.b, a that is one; a lazy command's "module:attr" its module."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def longest(dotted: str) -> str | None:
        while dotted and dotted not in names:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {longest(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            else:
                base = node.module
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in names else longest(base)
                      for a in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            head = node.value.split(":")[0]
            if ":" in node.value and head in names:
                found.add(head)
    return found - {None, name}


@functools.cache
def module_graph() -> dict:
    """module -> the modules of the house it imports."""
    names = {module_name(p, root): (p, root) for p, root in sources()}
    return {name: resolved(path, root, set(names)) for name, (path, root) in names.items()}


def graph() -> dict:
    edges = {}
    for path, root in sources():
        if root == INJECT:  # the hook runs inside the user's program, stdlib only
            continue
        source = unit(module_name(path))
        for name in imported(path):
            target = unit(name)
            if target and target != source and not (target == name == "analysis"):
                edges.setdefault(source, set()).add(target)
    return edges


def cycle(edges: dict) -> list | None:
    """One cycle of the graph as a list of units, else None."""
    state, stack = {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == "open":
                return stack[stack.index(v):] + [v]
            if v not in state and (found := visit(v)):
                return found
        stack.pop()
        state[u] = "done"
        return None

    for u in sorted(edges):
        if u not in state and (found := visit(u)):
            return found
    return None


def test_no_unit_imports_one_that_imports_it_back():
    assert cycle(graph()) is None


def test_no_module_imports_one_that_imports_it_back():
    """Inside a sub-package too: study's parts, results and publish once went round in a
    circle (overview -> publish -> parts -> results -> runs -> results)."""
    assert cycle(module_graph()) is None


def test_no_module_is_over_400_lines():
    """House style: small modules (aim at ~300 lines). Nothing is exempt."""
    long = {str(p.relative_to(ROOT)): n for p, _ in sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_pipeline_order_holds():
    """readers <- measures <- render <- store, none of them reaching up to the capture, the
    study, the CLI or the harness; the analysis never imports the harness."""
    edges = graph()
    # Leaves any layer may use: the one error type, how gapscope was installed (for hints).
    leaves = {"analysis.errors", "analysis.install", "analysis.outputs"}
    assert not edges.get("analysis.errors") and not edges.get("analysis.install")
    below = {"analysis.readers": leaves,
             "analysis.measures": leaves | {"analysis.readers"},
             "analysis.render": leaves | {"analysis.readers", "analysis.measures"},
             "analysis.store": leaves | {"analysis.readers", "analysis.measures",
                                         "analysis.render"}}
    for source, allowed in below.items():
        assert edges.get(source, set()) <= allowed, source
    assert not any("harness" in targets for source, targets in edges.items()
                   if source.startswith("analysis"))
    # the library never reaches the study built on it (nor ships it: tests/test_wheel.py)
    assert not any("study" in targets for source, targets in edges.items()
                   if source.startswith("analysis"))


def public_face() -> dict:
    """module -> the names the study may import from it: the library's face (`analysis`), its
    building blocks (`analysis.toolkit`) and its CLI's (`analysis.cli`), each by its __all__."""
    import analysis
    import analysis.cli
    import analysis.toolkit

    return {m.__name__: set(m.__all__) for m in (analysis, analysis.toolkit, analysis.cli)}


def private_imports(path: Path, face: dict) -> list:
    """`module.name` of each import of the library in one module that is not the public face."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names
                    if unit(a.name) and a.name.split(".")[0] == "analysis" and a.name not in face]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] == "analysis":
            out += [f"{node.module}.{a.name}" for a in node.names
                    if a.name not in face.get(node.module, ())]
    return out


def test_the_study_imports_only_the_librarys_public_face(tmp_path):
    """study/ is built on the library as a user would build on it: `analysis`, `analysis.toolkit`
    and `analysis.cli` by their __all__, never a module inside (a name it needs is made public
    in toolkit.py, deliberately)."""
    face = public_face()
    found = {str(p.relative_to(ROOT)): bad for p in (ROOT / "study").rglob("*.py")
             if (bad := private_imports(p, face))}
    assert found == {}
    probe = tmp_path / "probe.py"
    probe.write_text("from analysis.measures.stats import median\n"
                     "from analysis.toolkit import median\nimport analysis.readers\n")
    assert private_imports(probe, face) == ["analysis.measures.stats.median", "analysis.readers"]


def test_the_check_finds_a_cycle():
    """The checker itself: a two-unit cycle and a three-unit one are found, a chain is not."""
    assert cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}}) is None
    assert unit("gapscope.analysis.capture.doctor") == "analysis.capture"
    assert unit("analysis.errors") == "analysis.errors"


def test_the_module_graph_resolves_names_to_their_modules():
    """`from .text import wrap` is an edge to study.text, not to the package; `from . import
    observer` to study.observer; a lazy command's string to its module; the hook's modules by
    their own names."""
    edges = module_graph()
    assert {"study.text", "study.observer"} <= edges["study.runs"]
    assert "study" not in edges["study.runs"]
    assert "analysis.capture.doctor" in edges["analysis.cli"]
    assert "sitecustomize" in edges


def climbs(argv: list) -> list:
    """The calls back up that one command makes (issue 40's walk): each distinct call from a
    module of analysis into a module that imports it (directly or not: a module above it),
    such as a callback handed down, while the command runs in this process."""
    import sys

    from click.testing import CliRunner

    from analysis.cli import main

    graph = module_graph()

    @functools.cache
    def above(module: str) -> frozenset:
        """The modules `module` is imported by, transitively."""
        return frozenset(m for m in graph if module in reach(m))

    @functools.cache
    def reach(module: str) -> frozenset:
        seen, todo = set(), [module]
        while todo:
            for m in graph.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return frozenset(seen)

    found = set()

    def profile(frame, event, _arg):
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if (caller != callee and caller.startswith("analysis.")
                and callee.startswith("analysis.") and callee in above(caller)):
            found.add((caller, f"{callee}.{frame.f_code.co_name}"))

    sys.setprofile(profile)
    try:
        result = CliRunner().invoke(main, argv)
    finally:
        sys.setprofile(None)
    assert result.exit_code == 0, result.output
    return sorted(found)


def test_the_analyze_walk_climbs_back_at_most_three_times(tmp_path):
    """`gapscope analyze` goes down the stack (cli -> api -> readers -> measures -> render) and
    climbs back up at most three times: the step notes come from what the analysis returned
    (no call back into api), the figures' helpers live in render/mpl.py (no legend handed to
    and fro between plots and plots_timeline), the JSON values (measures/plain.py) below the
    API. What remains are callbacks handed down: the file writer, the host table's lines."""
    run = ROOT / "tests" / "data" / "runs" / "graphed-sync-graphlevel"
    found = climbs(["analyze", str(run), "--plot", str(tmp_path / "a.png"), "--perfetto",
                    str(tmp_path / "a.json")])
    assert len(found) <= 3, found
    for fmt in ("json", "md"):
        assert len(climbs(["analyze", str(run), "--format", fmt])) <= 3
