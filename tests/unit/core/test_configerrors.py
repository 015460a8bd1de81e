"""sync.core.configerrors: a validation problem is one line naming the key and the fix, and a
key the file does not know names the known key it most likely meant."""

from __future__ import annotations

from pathlib import Path

from sync.core.config import Settings
from sync.core.configerrors import describe


def test_a_missing_section_and_key_say_to_add_them() -> None:
    p = Path("sync.toml")
    assert describe({"loc": ("upstream",), "type": "missing", "msg": "x"}, p, Settings) == (
        "sync.toml: section [upstream] is required; add it (see config.example.toml)"
    )
    assert "[upstream] email is required" in describe(
        {"loc": ("upstream", "email"), "type": "missing", "msg": "x"}, p, Settings
    )


def test_a_mistyped_key_names_the_known_key_it_likely_meant() -> None:
    line = describe(
        {"loc": ("mirror", "pth"), "type": "extra_forbidden", "msg": "x"}, Path("s.toml"), Settings
    )
    assert line == "s.toml: unknown key mirror.pth; did you mean path? (see config.example.toml)"
    far = describe({"loc": ("zzz",), "type": "extra_forbidden", "msg": "x"}, Path("s"), Settings)
    assert "remove it or check its spelling" in far
