"""A configuration problem as the one line a user reads: the key, what is wrong, the fix, and
for a key the file does not know, the known key it most likely meant (`difflib`)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel


def describe(err: dict[str, Any], path: Path, model: type[BaseModel]) -> str:
    """One pydantic error `err` of the file at `path` (validated as `model`), as one line."""
    key = ".".join(str(p) for p in err["loc"]) or "(file)"
    kind = err["type"]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "missing":
        section, _, name = key.rpartition(".")
        if not section:
            return f"{path}: section [{name}] is required; add it (see config.example.toml)"
        return f"{path}: [{section}] {name} is required; add it (see config.example.toml)"
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(
            str(err["loc"][-1]), _known_keys(model, err["loc"][:-1]), n=1
        )
        if close:
            return f"{path}: unknown key {key}; did you mean {close[0]}? (see config.example.toml)"
        return f"{path}: unknown key {key}; remove it or check its spelling against config.example.toml"
    return f"{path}: {key}: {msg}"


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at `loc` (a section, `upstream.accounts.0`, the file) knows."""
    for part in loc:
        if isinstance(part, int):  # an item of a list: the list's model
            continue
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        # `X | None` and `list[X] | None`: the model inside.
        found = [
            t
            for a in (annotation, *get_args(annotation))
            for t in (a, *get_args(a))
            if isinstance(t, type) and issubclass(t, BaseModel)
        ]
        if not found:
            return []
        model = found[0]
    return [f.alias or name for name, f in model.model_fields.items()]  # as the file spells them
