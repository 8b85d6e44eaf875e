"""The documentation's markdown pages: the README and docs/, without the R site that pkgdown writes into docs/r/."""
from __future__ import annotations

from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


def doc_pages() -> List[Path]:
    return [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] != "r")
