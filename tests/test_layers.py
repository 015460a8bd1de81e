"""The package listing is the architecture: each layer of `sync/` imports only the layers below it.

Every package's `__init__.py` docstring ends its first paragraph with a line `May import: a, b`
naming the packages it may use. This test holds the code to those lines and the lines to the
order of `LAYERS`, so an import that runs up a layer (the store importing a job, a job importing
the daemon) fails here with the file and line that made it.
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
#: Modules at the top of the package: the entry points, above every layer.
ENTRY = {"__init__", "__main__", "cli"}


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
    """The layer a dotted `sync.x...` module belongs to (None for the entry modules)."""
    head = module.split(".")[1]
    return head if head in LAYERS else None


def test_every_package_of_sync_is_a_layer_and_every_module_lives_in_one() -> None:
    """No module floats at the top of `sync/` beside the layers, apart from the entry points."""
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in PKG.glob("*.py")}
    assert packages == set(LAYERS), "a package is missing from LAYERS, or LAYERS names a ghost"
    assert modules <= ENTRY, f"modules outside any layer: {sorted(modules - ENTRY)}"


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


def test_the_checker_sees_an_import_that_runs_up(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function is found, with its line."""
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    from sync.daemon.service import Daemon\n")
    assert imports_of(sample) == [(2, "sync.daemon.service")]
    assert layer_of("sync.daemon.service") == "daemon"
