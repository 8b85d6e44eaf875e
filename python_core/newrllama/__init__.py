"""newrllama: many prompts through a local GGUF model, decoded together in batches.

    import newrllama
    with newrllama.Model() as model, newrllama.Context(model) as ctx:
        for c in ctx.generate_parallel(["The capital of France is", "2 + 2 ="]):
            print(c.text, c.finish_reason)
"""
from .aio import AsyncTextStream
from .agreement import Agreement, agreement
from .annotate import annotate
from .annotation import Annotation, least_confident
from .calibration import Calibration, calibrate
from .cluster import Cluster, ClusterStats
from .context import Context
from .convenience import generate_parallel
from .embedded import default_model_path
from .findings import (CodingPlan, Coefficient, Prevalence, Regression, Share, ShareDifference, cross_fit,
                       methods_text, plan_coding, prevalence, read_coding_sheet, regression, write_coding_sheet)
from .errors import (AnnotationWarning, ClosedError, ClusterError, ContextError, GenerationError, InvalidArgumentError, LibraryMismatchError,
                     ModelLoadError, NewrllamaError, TemplateError, TokenizeError)
from .model import Model
from .params import SamplingParams
from .results import Completion, GenerationStats
from .policy import SchedulerConfig
from .scheduler import EngineStats
from .system import Device, SystemInfo, system_info
from .validation import LabelScores, ReliabilityBin, Validation, validate
from .stream import TextStream

from .version import __version__

__all__ = [
    "Agreement", "Annotation", "AnnotationWarning", "AsyncTextStream", "Calibration", "ClosedError", "Cluster",
    "ClusterError", "ClusterStats", "CodingPlan", "Coefficient", "Completion", "Context", "ContextError", "Device",
    "EngineStats", "GenerationError", "GenerationStats", "InvalidArgumentError", "LabelScores",
    "LibraryMismatchError", "Model", "ModelLoadError", "NewrllamaError", "Prevalence", "Regression", "ReliabilityBin",
    "SamplingParams", "SchedulerConfig", "Share", "ShareDifference", "SystemInfo", "TemplateError", "TextStream", "TokenizeError",
    "Validation", "agreement", "annotate", "calibrate", "cross_fit", "default_model_path", "generate_parallel", "least_confident",
    "methods_text", "plan_coding", "prevalence", "read_coding_sheet", "regression", "system_info", "validate",
    "write_coding_sheet",
]
