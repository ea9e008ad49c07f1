"""The house's layers: no package imports one that imports it back, and the pipeline's order holds.

Every import in analysis/ and harness/ is read from the source (ast: function-level imports
too, and the module strings of the CLI's lazy commands), each resolved to its unit: a
sub-package of analysis (readers, measures, render, store, capture, study), a top-level module
of analysis (errors, api, sweep, cli) or harness. The units' graph must have no cycle.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("analysis", "harness")


def unit(module: str) -> str | None:
    """The unit a dotted module name belongs to, None outside the two packages."""
    parts = module.split(".")
    if parts[0] == "gapscope":
        parts = parts[1:]
    if not parts or parts[0] not in PACKAGES:
        return None
    if parts[0] == "harness" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set:
    """The dotted names a module imports, relative imports resolved, lazy ones included."""
    name = module_name(path)
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


def graph() -> dict:
    edges = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "inject" in path.parts:  # the hook runs inside the user's program, stdlib only
                continue
            source = unit(module_name(path))
            for name in imported(path):
                target = unit(name)
                # `from analysis import errors` names the module analysis.errors
                if target == "analysis" and name.count(".") >= 1:
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


def test_the_pipeline_order_holds():
    """readers <- measures <- render <- store, none of them reaching up to the capture, the
    study, the CLI or the harness; the analysis never imports the harness."""
    edges = graph()
    # Leaves any layer may use: the one error type, how gapscope was installed (for hints).
    leaves = {"analysis.errors", "analysis.install"}
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


def test_the_check_finds_a_cycle():
    """The checker itself: a two-unit cycle and a three-unit one are found, a chain is not."""
    assert cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}}) is None
    assert unit("gapscope.analysis.capture.doctor") == "analysis.capture"
    assert unit("analysis.errors") == "analysis.errors"
