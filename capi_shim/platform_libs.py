"""How the platform names shared libraries, and what the shim's C needs defined there.

newrllama builds on Linux and macOS. Any other platform, Windows first of all, is refused here: the
shim's C uses POSIX (dlfcn, pthreads, unistd), and nothing of it has been ported or run elsewhere.
Stdlib only, and loaded by path: capi_shim/build.py runs inside setuptools, and
scripts/build_llama_cpp.py runs before anything is installed.
"""
import sys
from dataclasses import dataclass
from typing import Optional, Tuple


class UnsupportedPlatform(RuntimeError):
    pass


@dataclass(frozen=True)
class SharedLibraries:
    suffix: str
    # The shim is compiled with _POSIX_C_SOURCE, which on macOS hides dladdr and _SC_NPROCESSORS_ONLN
    # unless _DARWIN_C_SOURCE opens them again (glibc's are opened by _GNU_SOURCE in the C itself).
    feature_macros: Tuple[Tuple[str, Optional[str]], ...] = ()

    def file_name(self, name: str) -> str:
        """The file of library `name` ('llama' -> 'libllama.so' on Linux, 'libllama.dylib' on macOS)."""
        return f"lib{name}{self.suffix}"


_BY_PLATFORM = {
    "linux": SharedLibraries(".so"),
    "darwin": SharedLibraries(".dylib", (("_DARWIN_C_SOURCE", None),)),
}


def shared_libraries(platform: Optional[str] = None) -> SharedLibraries:
    """The shared libraries of `platform` (a sys.platform value; None: this one)."""
    platform = sys.platform if platform is None else platform
    if platform in _BY_PLATFORM:
        return _BY_PLATFORM[platform]
    name = "Windows" if platform in ("win32", "cygwin") else f"sys.platform {platform!r}"
    raise UnsupportedPlatform(f"newrllama builds on Linux and macOS only; {name} is not supported (its C shim "
                              "uses POSIX dlfcn and pthreads)")
