"""The layout shows the design: roofline's subpackages, and which may run which. The rules are
about packages, read from import statements (roofline.core.code), with no module list."""

import ast
from pathlib import Path

import pytest

from roofline.core.code import code_deps, imported_modules

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in (ROOT / "roofline").glob("*/__init__.py"))

# Lowest first: each package imports only those before it (the shared records, the device seam,
# configuration, the several-machines rules, measuring, interpretation, rendering).
LAYERS = [
    "core",
    "device",
    "configuration",
    "machines",
    "measuring",
    "interpretation",
    "rendering",
]
# What the deliverables derive from measurements: a measuring stage running any of it would
# stale every GPU measured elsewhere when a column is renamed or a flag reworded; and
# interpretation never measures.
INTERPRETING = ("interpretation", "rendering")


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "roofline" and len(parts) > 2 else None


def test_every_subpackage_has_its_layer():
    assert sorted(LAYERS) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_packages_before_it(package):
    wrong = []
    for path in sorted((ROOT / "roofline" / package).glob("*.py")):
        for module in imported_modules(path):
            used = package_of(module)
            below = LAYERS[: LAYERS.index(package)]
            if package in INTERPRETING and used == "measuring":
                below = []
            if used and used != package and used not in below:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong


@pytest.mark.parametrize("stage", ["probe", "benchmark", "sweep", "knobs"])
def test_no_measuring_stage_runs_interpretation_or_rendering(stage):
    ran = code_deps(f"stages.{stage}", ROOT)
    assert not [f for f in ran if f.split("/")[1] in INTERPRETING]


def our_modules() -> dict[str, frozenset[str]]:
    """Each module of roofline/ -> the modules of roofline/ it imports (packages' __init__ files
    aside: they hold no code)."""
    files = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts): p
        for p in (ROOT / "roofline").rglob("*.py")
        if p.name != "__init__.py"
    }
    return {m: imported_modules(p) & files.keys() - {m} for m, p in files.items()}


def circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The modules that reach each other through imports, each group sorted (Tarjan's strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for used in sorted(graph[module]):
            if used not in index:
                visit(used)
                low[module] = min(low[module], low[used])
            elif used in stack:
                low[module] = min(low[module], index[used])
        if low[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_circles_are_found():
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert circles(graph | {"d": frozenset({"a"})}) == [["a", "b", "c"]]
    assert circles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_no_module_of_roofline_imports_one_that_imports_it():
    """Types-only imports count too: a circle is a circle to whoever reads the code."""
    assert circles(our_modules()) == []


LARGEST_MODULE_LINES = 500  # one sitting's reading


def test_each_module_is_short_enough_to_read_in_one_sitting():
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "roofline").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) >= LARGEST_MODULE_LINES
    }
    assert not long


# Where a label or a panel sits is drawing, not a figure a reader is told: plot.py's geometry.
DRAWING = {
    ("plot.py", f) for f in ("draw_slopes", "label_roofs", "palette", "draw_sweeps", "draw_knobs")
}
ARITHMETIC = (ast.Div, ast.Mult, ast.Sub, ast.Pow, ast.FloorDiv, ast.Mod)


def arithmetic_in(source: str, module: str) -> list[str]:
    """Each arithmetic expression of a module, outside its drawing geometry, as "line: code"."""
    found, tree = [], ast.parse(source)
    owner = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                owner.setdefault(id(inner), node.name)
    for node in ast.walk(tree):
        computes = isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ARITHMETIC)
        if computes and (module, owner.get(id(node))) not in DRAWING:
            found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_a_figure_computed_in_rendering_is_found():
    assert arithmetic_in("def f(a, b):\n    return f'{a / b:.0%}'\n", "report.py") == [
        "report.py:2: a / b"
    ]
    assert arithmetic_in("def palette(i):\n    return i % 3\n", "plot.py") == []


def test_rendering_computes_no_figure():
    """Every number the pages show is computed in roofline.interpretation (figures, gaps,
    breakdown, interpret): rendering words it, and draws it."""
    found = [
        line
        for path in sorted((ROOT / "roofline/rendering").glob("*.py"))
        for line in arithmetic_in(path.read_text(encoding="utf-8"), path.name)
    ]
    assert found == []


def test_the_gpu_side_tests_coverage_traces_are_test_modules_here():
    # A renamed module would drop out of the coverage of the GPU-side code unnoticed.
    from tests.conftest import GPU_SIDE_TESTS

    here = {path.stem for path in Path(__file__).parent.glob("test_*.py")}
    assert not GPU_SIDE_TESTS - here, sorted(GPU_SIDE_TESTS - here)
