"""For the seam's tests (`sync.store.seam`, `sync.store.seamparts`): a protocol's members, a
class's members against them, and mypy run on a test file.

`isinstance` against a `runtime_checkable` protocol sees names only; `mismatches` adds the
parameters (names, kinds, defaults) of each method, so a protocol keeps the signatures of the
implementation it was written from. Their types are mypy's: `type_errors` runs mypy strict, with
the project's settings and a cache of its own, on the files given (each test file assigns the
stores' classes to the protocols in a function no test calls).
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT

#: Dunder methods a protocol may name (a listing is a context manager); the others are Python's.
_DUNDERS = ("__enter__", "__exit__")


def members(proto: type) -> list[str]:
    """The members `proto` itself declares: methods, properties and annotated attributes."""
    names = [
        n
        for n, v in vars(proto).items()
        if (not n.startswith("_") or n in _DUNDERS)
        and (inspect.isfunction(v) or isinstance(v, property))
    ]
    return names + [n for n in vars(proto).get("__annotations__", {}) if not n.startswith("_")]


def _parameters(fn: Any) -> list[tuple[str, Any, Any]]:
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(inspect.unwrap(fn)).parameters.values()
    ]


def mismatches(proto: type, impl: object) -> list[str]:
    """The members of `proto` that `impl` (a class, or an instance: attributes set by its
    `__init__` count for the protocol's properties) lacks, or whose parameters (names, kinds,
    defaults) differ from the protocol's."""
    cls = impl if isinstance(impl, type) else type(impl)
    out: list[str] = []
    for name in members(proto):
        declared = vars(proto).get(name)
        found = inspect.getattr_static(cls, name, None)
        if declared is None or isinstance(declared, property):  # read: any attribute will do
            if found is None and (impl is cls or not hasattr(impl, name)):
                out.append(f"{cls.__name__}.{name}: missing")
        elif found is None:
            out.append(f"{cls.__name__}.{name}: missing")
        elif not callable(found):
            out.append(f"{cls.__name__}.{name}: not a method")
        elif _parameters(declared) != _parameters(found):
            out.append(f"{cls.__name__}.{name}: parameters differ from {proto.__name__}'s")
    return out


def type_errors(files: Sequence[Path]) -> str:
    """mypy's report on `files` (the project's settings, strict), "" when it finds nothing."""
    cache = ROOT / ".mypy_cache" / "seam"  # its own: never the one `mypy sync` is writing
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if r.returncode == 0 else r.stdout + r.stderr
