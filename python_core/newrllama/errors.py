"""Exceptions raised by newrllama. Every error of the package is a NewrllamaError."""
from __future__ import annotations


class NewrllamaError(Exception):
    """Base class of every error raised by newrllama."""


class InvalidArgumentError(NewrllamaError, ValueError):
    """An argument has the wrong type or value; nothing was run."""


class ModelLoadError(NewrllamaError):
    """A model file is missing, not GGUF, truncated or otherwise unloadable."""


class ContextError(NewrllamaError):
    """llama.cpp could not create a context with the requested sizes."""


class TokenizeError(NewrllamaError):
    """Text could not be tokenized."""


class TemplateError(NewrllamaError):
    """A chat template could not be applied."""


class GenerationError(NewrllamaError):
    """Generation failed as a whole (a single prompt's failure is reported in its Completion)."""


class ClosedError(NewrllamaError):
    """A model or context was used after close()."""


class LibraryMismatchError(NewrllamaError, ImportError):
    """The libllama loaded at import is not the one the shim was built against."""


class ClusterError(NewrllamaError):
    """A cluster could not start (Ray missing, workers that never became ready) or lost its workers."""


class DeterminismWarning(UserWarning):
    """A context cannot hold what was asked of its numbers (batch invariance on layers offloaded to a GPU)."""


class NewrllamaDeprecationWarning(FutureWarning):
    """An old name that still works; the message names the new one. A FutureWarning, so that it shows by default."""


class CodingSampleWarning(UserWarning):
    """Coded texts given without their design that do not look like a random sample of the texts (findings/
    sample_check.py): estimates that assume one may not hold."""


class FailedTextsWarning(UserWarning):
    """Texts without a label (their annotation failed) left out of an estimate: it is of the labelled texts alone."""


class BaseModelWarning(UserWarning):
    """Labels asked of a base model (one without a chat template, such as the embedded gemma-3-270m): it continues
    text rather than follows an instruction, and its labels are rarely worth having."""


class AnnotationWarning(UserWarning):
    """Labels that look wrong as a whole: nearly every text has one label, or many change with the listing order."""
