"""Where the checkout is: the project's root, from which `python -m sync` runs, and its parts."""

from __future__ import annotations

from pathlib import Path

#: The project's root (the checkout), as every suite that reads its files or runs it needs.
ROOT = Path(__file__).resolve().parents[2]
