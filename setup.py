# setuptools has no pyproject.toml key for cffi's build hook; everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["capi_shim/build.py:ffibuilder"])
