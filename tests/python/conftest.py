"""Shared fixtures: the embedded model is loaded once per session."""
from __future__ import annotations

import os
import signal

import pytest

import newrllama


@pytest.fixture(scope="session")
def model():
    # A run on a device (scripts/vulkan_on_lavapipe.sh) tests with some and no layers offloaded, besides the
    # default of every layer on a build that can offload.
    layers = os.environ.get("NEWRLLAMA_TEST_GPU_LAYERS")
    with newrllama.Model(**({"n_gpu_layers": int(layers)} if layers else {})) as m:
        yield m


@pytest.fixture
def ctx(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=8, n_threads=2) as c:
        yield c


@pytest.fixture
def ctx4(model):
    with newrllama.Context(model, n_ctx=2048, n_seq_max=4, n_threads=2) as c:
        yield c


@pytest.fixture(scope="session")
def reference_llama():
    """llama-cpp-python's Llama over the same file and libllama, as an independent oracle of logits."""
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(newrllama.default_model_path(), n_ctx=1024, n_batch=1024, logits_all=True,
                          verbose=False, n_threads=2)
    yield llm
    llm.close()


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt during the test whatever the parent did: a shell starts background
    jobs (a CI run started with &) with SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
