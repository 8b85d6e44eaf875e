"""Reuters-21578 stories that Debian's r-cran-tm ships (texts/acq: 50 acquisitions, texts/crude: 20 crude oil)."""
from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import List, Tuple

LABELS = {"acq": "acquisition", "crude": "crude oil"}


def tm_texts_dir() -> Path:
    """r-cran-tm's texts folder, or NEWRLLAMA_TM_TEXTS where R is not installed (a copy of its acq and crude)."""
    if os.environ.get("NEWRLLAMA_TM_TEXTS"):
        return Path(os.environ["NEWRLLAMA_TM_TEXTS"])
    out = subprocess.run(["Rscript", "-e", 'cat(system.file("texts", package = "tm"))'], capture_output=True,
                         text=True, check=True).stdout.strip()
    if not out:
        raise RuntimeError("the R package tm is not installed (Debian: apt-get install r-cran-tm)")
    return Path(out)


def reuters_stories() -> List[Tuple[str, str]]:
    """(title and body, label) of every story, acquisitions first."""
    stories = []
    for folder, label in LABELS.items():
        for path in sorted((tm_texts_dir() / folder).glob("*.xml")):
            root = ET.parse(path).getroot()
            title = root.findtext("TEXT/TITLE") or ""
            body = root.findtext("TEXT/BODY") or ""
            stories.append((f"{title.strip()}\n{' '.join(body.split())}", label))
    return stories
