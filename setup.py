# setuptools has no pyproject.toml key for cffi's build hook; everything else is in pyproject.toml.
import hashlib
import sys

from setuptools import setup

# The shim's rpath names the libllama of the environment being installed into, and setuptools reuses
# a shim left in build/ while its sources are unchanged: an install into another environment would get
# that environment's rpath. So each environment builds in a folder of its own.
BUILD_BASE = f"build/{hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]}"

setup(cffi_modules=["capi_shim/build.py:ffibuilder"], options={"build": {"build_base": BUILD_BASE}})
