"""The package listing is the architecture: each layer of `sync/` imports only the layers below it.

Every package's `__init__.py` docstring ends its first paragraph with a line `May import: a, b`
naming the packages it may use. This test holds the code to those lines and the lines to the
order of `LAYERS`, so an import that runs up a layer (the store importing a job, a job importing
the daemon) fails here with the file and line that made it. The entry modules are held too
(`ENTRY`: `sync.cli` imports only the commands), and no two modules anywhere under `sync/` may
import each other, however indirectly: an import under `if TYPE_CHECKING:` or inside a function
counts, because a cycle hidden from the interpreter is still a cycle for the reader.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PKG = ROOT / "sync"

#: The layers from the ground up. A package may import only packages before it in this list
#: (and the modules of its own package). `emulator` stands apart from the client's layers: it
#: shares only the spec's model with them, so it can never pass the client's assumptions on.
LAYERS: list[str] = [
    "model",
    "core",
    "emulator",
    "channel",
    "management",
    "pipeline",
    "store",
    "ingest",
    "jobs",
    "readers",
    "daemon",
    "commands",
]
#: Modules at the top of the package: the entry points, above every layer, each with the layers
#: it may import. `cli` is the `ccsync` group and nothing else: what the commands share lives
#: beside them (`sync.commands.wiring`), so no command imports its entry point back.
ENTRY: dict[str, set[str]] = {"__init__": set(), "__main__": {"cli"}, "cli": {"commands"}}


def declared(package: str) -> set[str]:
    """The packages `package`'s docstring says it may import (`May import: a, b` or `nothing`)."""
    doc = ast.get_docstring(ast.parse((PKG / package / "__init__.py").read_text())) or ""
    found = re.search(r"^May import: (.+?)\.?(?:\n\n|\Z)", doc, re.M | re.S)
    assert found, f"sync/{package}/__init__.py: its docstring needs a line 'May import: ...'"
    text = " ".join(found.group(1).split())
    return set() if text == "nothing" else {p.strip(" `") for p in text.split(",")}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every `sync.*` import in `path`, at any depth (lazy imports count)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sync":
                out += [(node.lineno, f"sync.{a.name}") for a in node.names]
            elif node.module.startswith("sync."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("sync.")]
    return out


def layer_of(module: str) -> str | None:
    """The layer a dotted `sync.x...` module belongs to, or the entry module it is (`cli`: no
    layer may import one, they sit above them all); None for `sync` itself (`__version__`)."""
    head = module.split(".")[1]
    return head if head in LAYERS or head in ENTRY else None


def test_every_package_of_sync_is_a_layer_and_every_module_lives_in_one() -> None:
    """No module floats at the top of `sync/` beside the layers, apart from the entry points."""
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in PKG.glob("*.py")}
    assert packages == set(LAYERS), "a package is missing from LAYERS, or LAYERS names a ghost"
    assert modules <= set(ENTRY), f"modules outside any layer: {sorted(modules - ENTRY)}"


@pytest.mark.parametrize("package", LAYERS)
def test_each_layer_declares_only_layers_below_it(package: str) -> None:
    below = set(LAYERS[: LAYERS.index(package)])
    assert declared(package) <= below, f"sync/{package} declares imports from above itself"


@pytest.mark.parametrize("package", LAYERS)
def test_each_layer_imports_only_what_its_docstring_declares(package: str) -> None:
    allowed = declared(package) | {package}
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for path in sorted((PKG / package).rglob("*.py"))
        for line, module in imports_of(path)
        if (layer := layer_of(module)) is not None and layer not in allowed
    ]
    assert not wrong, "imports running up or across the layers:\n" + "\n".join(wrong)


@pytest.mark.parametrize("entry", sorted(ENTRY))
def test_each_entry_module_imports_only_its_layers(entry: str) -> None:
    path = PKG / f"{entry}.py"
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for line, module in imports_of(path)
        if (layer := layer_of(module)) is not None and layer not in ENTRY[entry]
    ]
    assert not wrong, "an entry module reaching past its layers:\n" + "\n".join(wrong)


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at `path` under the package directory `root`."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Every module under the package `root` and the modules of that package it imports.

    `from a.b import c` names the module `a.b.c` when `c` is one, else `a.b` (the module that
    defines `c`). A package is not counted as imported by its own modules' imports: Python runs a
    package's `__init__` before its modules, but a re-export there is not a dependency of theirs.
    """
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_imports_another_that_imports_it_back() -> None:
    """No import cycle under `sync/`, the entry modules included, however it is written."""
    found = cycles(import_graph(PKG))
    assert not found, "import cycles (each a set of modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_the_checker_sees_a_cycle_that_exists_only_in_annotations(tmp_path: Path) -> None:
    """The cycle checker itself: a `TYPE_CHECKING` import and a lazy one close a circle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.a import A\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\nclass A: ...\n"
    )
    (pkg / "b.py").write_text("def f():\n    from pkg import c\n")
    (pkg / "c.py").write_text("from pkg.a import A\n")
    (pkg / "d.py").write_text("from pkg.c import A\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_checker_sees_an_import_that_runs_up(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function is found, with its line."""
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    from sync.daemon.service import Daemon\n")
    assert imports_of(sample) == [(2, "sync.daemon.service")]
    assert layer_of("sync.daemon.service") == "daemon"
    # A command taking a helper from the entry point that imports it (by name, through
    # `sync.commands.COMMANDS`: a cycle no import statement shows) is an import running up.
    sample.write_text("from sync.cli import fail_cleanly\n")
    assert [layer_of(m) for _, m in imports_of(sample)] == ["cli"]
    assert "cli" not in declared("commands")


def _modules() -> list[Path]:
    """Every module under `sync/` a unit test must name: all but the emulator's (the spec's
    stand-in upstream, tested as a whole by `tests/e2e/test_emulator*.py`) and package docstrings."""
    return sorted(
        p
        for p in PKG.rglob("*.py")
        if p.name != "__init__.py" and "emulator" not in p.relative_to(PKG).parts
    )


def _unit_file(module: Path) -> Path:
    """`sync/<package>/<module>.py` -> `tests/unit/<package>/test_<module>.py`."""
    rel = module.relative_to(PKG)
    name = "main" if rel.stem == "__main__" else rel.stem
    return ROOT / "tests" / "unit" / rel.parent / f"test_{name}.py"


def test_every_module_has_a_unit_test_file_that_imports_it() -> None:
    """The test tree mirrors the package (httpx's `tests/client/`, `tests/models/`): each module
    under `sync/` has `tests/unit/<package>/test_<module>.py`, which imports the module and holds
    at least one test. A module added without one, or a unit file left behind by a module
    removed, fails here."""
    missing, unused = [], []
    for module in _modules():
        unit = _unit_file(module)
        if not unit.exists():
            missing.append(str(unit.relative_to(ROOT)))
            continue
        text = unit.read_text()
        dotted = ".".join(("sync", *module.relative_to(PKG).with_suffix("").parts))
        parent, _, leaf = dotted.rpartition(".")
        named = dotted in text or re.search(
            rf"from {re.escape(parent)} import [^\n]*\b{leaf}\b", text
        )
        if not named or "def test_" not in text:
            unused.append(str(unit.relative_to(ROOT)))
    assert not missing, f"modules without a unit test file: {missing}"
    assert not unused, f"unit test files that do not import their module or test nothing: {unused}"
    expected = {_unit_file(m) for m in _modules()}
    stray = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests" / "unit").rglob("test_*.py")
        if p not in expected
    ]
    assert not stray, f"unit test files naming no module under sync/: {stray}"
