"""The architecture holds: layers import downward only, no module imports itself back through
others, and no module grows past what a reader holds at once (docs/extending.md, "Layers").

Every ``import`` counts, including those inside functions: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hindsight", "instrument", "replay", "apps", "workloads", "validation", "predict")

#: (layer, module-name prefixes), bottom first; a module belongs to the longest prefix that names it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("format and system", ("hindsight", "hindsight.trace", "hindsight.system",
                           "hindsight.errors", "hindsight.conditions", "hindsight.outputs")),
    ("tracer", ("instrument",)),
    ("replay core", ("replay",)),
    ("programs, runs and formats", ("apps", "workloads", "hindsight.collect", "hindsight.programs",
                                    "hindsight.testbed",
                                    "replay.calibration", "hindsight.interop",
                                    "hindsight.examples")),
    ("validation", ("validation",)),
    ("prediction", ("predict",)),
    ("command line", ("hindsight.cli", "hindsight.check", "hindsight.info", "replay.cli",
                      "replay.replay_lines",
                      "replay.sweep_cli", "replay.calibration.cli", "hindsight.interop.cli",
                      "validation.cli", "predict.cli", "hindsight.aot_build")),
]
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules ``name`` imports (anywhere in the file)."""
    found = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def layer_of(name: str) -> int:
    best, level = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, level = len(p), i
    assert level is not None, f"{name} is in no layer: add it to tests/test_layers.py"
    return level


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


def test_imports_go_downward_only():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in GRAPH.items() for b in sorted(targets)
              if layer_of(b) > layer_of(a)]
    assert upward == []


def _cycles(graph: dict[str, set[str]] = GRAPH) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles() == []


def test_the_trace_core_and_system_modules_use_the_standard_library_only():
    # A traced rank loads these while the program runs (docs/robustness.md, "No observer effect").
    for name in ("hindsight.trace.core", "hindsight.system", "hindsight.errors",
                 "hindsight.conditions", "hindsight.outputs"):
        tree = ast.parse(MODULES[name].read_text())
        top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import)
               for a in n.names}
        top |= {n.module.split(".")[0] for n in tree.body
                if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        assert top <= {"__future__", "contextlib", "gc", "json", "os", "re", "struct",
                       "pathlib", "typing", "collections", "time", "hindsight"}, (name, top)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]}: {lines} lines (split it along its seams)"


def test_the_checker_sees_a_cycle_and_an_upward_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert layer_of("replay.engine") > layer_of("hindsight.trace.core")
    assert layer_of("replay.cli") > layer_of("predict.cli") - 1 > layer_of("replay.engine")
    assert _imports("hindsight.cli", MODULES["hindsight.cli"]) >= {"hindsight.errors"}


def test_the_trace_packages_lazy_index_is_every_modules_definitions():
    """``hindsight.trace`` finds a name's module by a pattern over the source: it names
    exactly the public module-level definitions the syntax trees have (the lower module first)."""
    from hindsight import trace as tf

    want: dict[str, str] = {}
    for mod in reversed(tf._MODULES):
        for node in ast.parse(MODULES[f"hindsight.trace.{mod}"].read_text()).body:
            names = []
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            want.update({n: mod for n in names if not n.startswith("_")})
    assert len(want) > 50
    assert tf._index() == want
