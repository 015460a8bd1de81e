"""The systemd units shipped in `systemd/`, read as their directives (for the unit and tenant
tests)."""

from __future__ import annotations

from pathlib import Path

UNITS = Path(__file__).resolve().parents[2] / "systemd"


def parse(name: str) -> dict[str, list[str]]:
    """The directives of unit `name` as `Section.Key` -> every value given, in order."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault(f"{section}.{key}", []).append(value)
    return out
