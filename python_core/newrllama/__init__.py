"""newrllama: many prompts through a local GGUF model, decoded together in batches.

    import newrllama
    with newrllama.Model() as model, newrllama.Context(model) as ctx:
        for c in ctx.generate_parallel(["The capital of France is", "2 + 2 ="]):
            print(c.text, c.finish_reason)
"""
from .context import Context
from .convenience import generate_parallel
from .embedded import default_model_path
from .errors import (ClosedError, ContextError, GenerationError, InvalidArgumentError, LibraryMismatchError,
                     ModelLoadError, NewrllamaError, TemplateError, TokenizeError)
from .model import Model
from .params import SamplingParams
from .results import Completion, GenerationStats

__version__ = "0.1.0"

__all__ = [
    "ClosedError", "Completion", "Context", "ContextError", "GenerationError", "GenerationStats",
    "InvalidArgumentError", "LibraryMismatchError", "Model", "ModelLoadError", "NewrllamaError",
    "SamplingParams", "TemplateError", "TokenizeError", "default_model_path", "generate_parallel",
]
