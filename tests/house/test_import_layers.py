"""The package's imports run one way: no import cycle inside ``perfkit/``, computed from the source.

Every ``import`` statement counts, the ones inside functions too (a lazy import is still a dependency);
only ``if TYPE_CHECKING:`` blocks are skipped (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "perfkit"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    found.add(a.name)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (child.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                # ``from pkg import submodule`` depends on the submodule; any other name on pkg itself
                # (the implicit import of a parent package is not counted, as import-linter does not)
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    found.add(sub if sub in modules else base)
            visit(child)

    visit(tree)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_graph_sees_imports():
    g = _graph()
    assert "perfkit.record" in g["perfkit"]  # the package's own re-export
    assert "perfkit.collectors.hub" in g["perfkit.collectors.segments"]


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_from_package_import_submodule_depends_on_the_submodule_only():
    g = _graph()
    assert "perfkit.cli.errors" in g["perfkit.cli.report"]


def test_no_import_cycle_inside_perfkit():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


# The rooms, bottom to top: a module imports its own room and the layers below it, never a layer above
# nor another room of its own layer (docs/design.md, "Imports run one way").
BASE = ("perfkit", "perfkit._layout", "perfkit.record", "perfkit.formatting", "perfkit.outputs", "perfkit.config",
        "perfkit.source", "perfkit.machine", "perfkit.dist", "perfkit.targets", "perfkit.batched_env",
        "perfkit.student_t")
LAYERS = (
    ("collectors", "envs", "rl"),
    ("pricing",),
    ("profile",),
    ("sweeps", "overhead"),
    ("analysis",),
    ("renderers", "lint"),
    ("cli", "pytest_plugin"),
    ("__main__",),
)


def room_of(module: str) -> tuple[int, str]:
    """(layer, room) of a perfkit module; the base is layer -1."""
    if module in BASE:
        return -1, "base"
    room = module.split(".")[1]
    for layer, rooms in enumerate(LAYERS):
        if room in rooms:
            return layer, room
    raise AssertionError(f"{module} is in no room: add it to BASE or LAYERS (and docs/design.md)")


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for a in sorted(graph):
        la, ra = room_of(a)
        for b in sorted(graph[a]):
            lb, rb = room_of(b)
            if lb > la or (lb == la and ra != rb and la >= 0):
                bad.append(f"{a} ({ra}) -> {b} ({rb})")
    return bad


def test_every_module_is_in_a_room():
    for name in _graph():
        room_of(name)


def test_imports_run_down_the_rooms():
    bad = upward_arrows(_graph())
    assert not bad, "imports against the rooms' order:\n" + "\n".join(bad)


def test_the_room_check_sees_an_upward_arrow():
    g = {"perfkit.record": {"perfkit.profile.session"}, "perfkit.profile.session": set(),
         "perfkit.sweeps.runner": {"perfkit.overhead.measure"}, "perfkit.overhead.measure": set()}
    assert upward_arrows(g) == ["perfkit.record (base) -> perfkit.profile.session (profile)",
                                "perfkit.sweeps.runner (sweeps) -> perfkit.overhead.measure (overhead)"]
