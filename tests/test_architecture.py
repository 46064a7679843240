"""The shape of src/torchpace, read with ast (nothing imported): data flows one way.

- no import circle between modules, counting every import: at module level, inside functions and
  under `if TYPE_CHECKING:` (an annotation-only import ties two modules as a runtime one does:
  neither can be read, tested or moved without the other);
- the trace layer never imports the doctor;
- no rule module imports another rule module, and the engine imports none;
- the library (everything but cli/, report/, __main__ and the applications below) never imports
  cli/ or report/.
- a rule reads only the finding type, the registry, the facts layer, the trace and the shared
  policies (fixes/), and the live records it judges;
- the live runner (runner/) never imports the diagnosis engine (doctor/), and the engine reads the
  runner's records only in annotations: the two meet in checkup.py;
- the shared decisions in policy/ are the ground floor: they import no other torchpace module;
- a function over 60 lines or past complexity 15 says why, in a `# long: ...` or `# complex: ...`
  comment on its def line or just above it;
- every import between layers (top-level packages and modules) goes one of the directions in
  LAYERS (docs/architecture.md draws them), and those directions go downward only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

SRC = Path(__file__).parents[1] / "src"
PACKAGE = SRC / "torchpace"
RULES = "torchpace.doctor.rules."
# Applications of the library, like cli/: they render reports for their user.
APPLICATIONS = (
    "torchpace.cli",
    "torchpace.report",
    "torchpace.__main__",
    # The training-framework callbacks write the report of their profiled window (its docstring
    # says so: an application of the library, not a part of it).
    "torchpace.callbacks",
)
# What a rule may import: it judges facts (issue 15 item 1).
RULE_READS = (
    "torchpace.doctor.finding",
    "torchpace.doctor.registry",
    "torchpace.doctor.facts",
    "torchpace.trace",
    "torchpace.fixes",  # one policy per decision: worker counts, precision, thread settings
    "torchpace.policy",  # the ground floor: devices, threads
    "torchpace.runner.sensors",  # the live records live rules judge (annotations only: below)
    "torchpace.environment.malloc",  # which allocator the live process loaded (a live fact)
)


# What each layer may import (annotation-only imports included), as docs/architecture.md draws it.
# "torchpace" is the package's own __init__ (the public API, loaded lazily by name).
LAYERS: dict[str, frozenset[str]] = {
    name: frozenset(allowed.split())
    for name, allowed in {
        "__main__": "cli",
        "cli": "checkup analysis verify bench compare report doctor runner environment policy "
        "teardown errors torchpace",
        "callbacks": "analysis report doctor data monitor policy errors",
        "report": "doctor runner trace bench compare measure errors torchpace",
        "checkup": "analysis verify doctor runner policy errors",
        "verify": "doctor runner measure data environment fixes policy cores trace",
        "analysis": "doctor runner trace errors",
        "compare": "doctor measure trace errors",
        "bench": "data train measure environment trace policy cores errors torchpace",
        "doctor": "runner environment trace fixes policy errors",
        "runner": "environment trace policy cores errors",
        "measure": "trace policy cores",
        "environment": "policy cores",
        "examples": "data train",
        "monitor": "train trace environment policy",
        "train": "dist environment fixes policy",
        "data": "trace fixes policy cores errors",
        "fixes": "policy",
        "trace": "teardown cores errors",
        "dist": "",
        "teardown": "",
        "cores": "",
        "errors": "",
        "policy": "",
        "torchpace": "",
    }.items()
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The torchpace modules one import statement loads (`from pkg import mod` names mod)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*up, *([node.module] if node.module else [])])
    for alias in node.names:
        full = f"{base}.{alias.name}"
        yield full if full in modules() else base


@cache
def imports(name: str, *, runtime: bool) -> frozenset[str]:
    """The torchpace modules `name` imports; `runtime`: leave out `if TYPE_CHECKING:` ones."""
    path = modules()[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree) if runtime else set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
            found.update(t for t in _targets(name, path, node) if t in modules())
    return frozenset(found - {name})


def edges(*, runtime: bool) -> Iterator[tuple[str, str]]:
    for name in modules():
        for target in imports(name, runtime=runtime):
            yield name, target


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules in an import graph (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def layer(module: str) -> str:
    """`torchpace.doctor.rules.x` -> `doctor`; the package's own __init__ -> `torchpace`."""
    return module.split(".")[1] if "." in module else module


def test_the_walk_sees_the_package() -> None:
    # A walk that found nothing would pass every check below.
    assert {"torchpace.trace.model", "torchpace.doctor.diagnose", "torchpace.cli.main"} <= set(
        modules()
    )
    assert "torchpace.trace.breakdown" in imports("torchpace.trace.model", runtime=True)


def test_the_circle_finder_finds_circles() -> None:
    # A finder that found nothing would pass the check below.
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    graph = {n: sorted(imports(n, runtime=False)) for n in modules()}
    assert cycles(graph) == []


def test_the_trace_layer_never_imports_the_doctor() -> None:
    bad = [
        (a, b)
        for a, b in edges(runtime=False)
        if a.startswith("torchpace.trace") and b.startswith("torchpace.doctor")
    ]
    assert bad == []


def test_no_rule_imports_another_rule() -> None:
    bad = {
        (a, b)
        for a, b in edges(runtime=False)
        if a.startswith(RULES) and b.startswith(RULES) and a != b
    }
    assert bad == set()


def test_the_engine_imports_no_rule() -> None:
    engine = "torchpace.doctor."
    bad = {
        (a, b)
        for a, b in edges(runtime=False)
        if a.startswith(engine) and not a.startswith(RULES) and b.startswith(RULES)
    }
    assert bad == set()


def test_rules_import_only_facts_trace_finding_and_registry() -> None:
    bad = {
        (a, b)
        for a, b in edges(runtime=False)
        if a.startswith(RULES)
        and b != "torchpace.doctor.rules"
        and not any(b == r or b.startswith(f"{r}.") for r in RULE_READS)
    }
    assert bad == set()


def _is_application(name: str) -> bool:
    return any(name == a or name.startswith(f"{a}.") for a in APPLICATIONS)


def test_the_library_never_imports_cli_or_report() -> None:
    bad = [
        (a, b)
        for a, b in edges(runtime=False)
        if not _is_application(a) and b.startswith(("torchpace.cli", "torchpace.report"))
    ]
    assert bad == []


def test_the_runner_never_imports_the_engine() -> None:
    bad = [
        (a, b)
        for a, b in edges(runtime=False)
        if a.startswith("torchpace.runner") and b.startswith("torchpace.doctor")
    ]
    assert bad == []


def test_the_engine_reads_the_runner_only_in_annotations() -> None:
    # A rule judges the records; it must not run (or import torch through) a sensor.
    bad = [
        (a, b)
        for a, b in edges(runtime=True)
        if a.startswith("torchpace.doctor") and b.startswith("torchpace.runner")
    ]
    assert bad == []


def test_policy_is_the_ground_floor() -> None:
    # Every layer calls these decisions; one that imported a layer would tie it to all of them.
    bad = [
        (a, b)
        for a, b in edges(runtime=False)
        if a.startswith("torchpace.policy") and not b.startswith("torchpace.policy")
    ]
    assert bad == []


def test_every_layer_is_in_the_table() -> None:
    assert {layer(m) for m in modules()} == set(LAYERS)


def test_layers_import_only_the_directions_the_table_allows() -> None:
    bad = sorted(
        (a, b)
        for a, b in edges(runtime=False)
        if layer(a) != layer(b) and layer(b) not in LAYERS[layer(a)]
    )
    assert bad == []


def test_the_directions_go_downward_only() -> None:
    # A table with a circle in it would allow the circles test_no_import_circle forbids, one
    # layer at a time.
    assert cycles({name: sorted(allowed) for name, allowed in LAYERS.items()}) == []


# A function longer or more branched than this says why in a comment on its def line or just above
# it (docs/architecture.md): `# long: <why>` past MAX_LINES, `# complex: <why>` past MAX_COMPLEXITY.
MAX_LINES = 60
MAX_COMPLEXITY = 15
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Cyclomatic complexity as radon counts it: 1, plus each if/elif/ternary, loop (and its
    else), except clause (and try's else), match case, assert, extra operand of and/or, and
    comprehension `for`/`if`; a nested function or class counts on its own."""
    count = 1
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
            count += 1
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            count += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try):
            count += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.Match):
            count += sum(1 for case in node.cases if not _wildcard(case.pattern))
        todo.extend(ast.iter_child_nodes(node))
    return count


def _wildcard(pattern: ast.pattern) -> bool:
    return isinstance(pattern, ast.MatchAs) and pattern.pattern is None


def _reasons(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The comments on the def line and on the comment lines just above it (and its decorators)."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    said = [lines[node.lineno - 1].partition("#")[2]]
    above = first - 1
    while above >= 0 and lines[above].lstrip().startswith("#"):
        said.append(lines[above].lstrip()[1:])
        above -= 1
    return " ".join(text.strip() for text in said)


def oversized() -> list[str]:
    """Every function in src/ over MAX_LINES or MAX_COMPLEXITY that does not say why."""
    found = []
    for name, path in modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            branches = complexity(node)
            said = _reasons(lines, node)
            if size > MAX_LINES and "long:" not in said:
                found.append(f"{name}.{node.name} (line {node.lineno}): {size} lines")
            if branches > MAX_COMPLEXITY and "complex:" not in said:
                found.append(f"{name}.{node.name} (line {node.lineno}): complexity {branches}")
    return found


def test_the_complexity_count_counts_branches() -> None:
    source = """
def f(xs, a, b):
    for x in xs:                 # 1
        if x and a or b:         # 1 + 2
            continue
    try:
        pass
    except ValueError:           # 1
        pass
    def inner(y):                # counts on its own
        return y if y else 0
    return [x for x in xs if x]  # 2
"""
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert complexity(function) == 1 + 1 + 3 + 1 + 2


def test_a_long_or_complex_function_says_why() -> None:
    assert oversized() == []
