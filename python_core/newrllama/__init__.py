"""newrllama: many prompts through a local GGUF model, decoded together in batches.

    import newrllama
    with newrllama.Model() as model, newrllama.Context(model) as ctx:
        for c in ctx.generate_parallel(["The capital of France is", "2 + 2 ="]):
            print(c.text, c.finish_reason)
"""
from .engine.calls.aio import AsyncTextStream
from .labels.agreement import Agreement, agreement
from .labels.annotate import annotate
from .labels.annotation import Annotation, least_confident
from .labels.annotations import Annotations
from .labels.annotation_plan import AnnotationPlan, plan_annotation
from .labels.annotation_task import AnnotationTask
from .labels.cascade import Cascade
from .labels.cascade_choice import CascadeChoice, choose_cascade_share
from .labels.calibration import Calibration, calibrate
from .cluster import Cluster, ClusterStats
from .engine.calls.context import Context
from .engine.calls.sized_context import generate_parallel
from .models.catalog import RecommendedModel, recommended_models
from .models.embedded import default_model_path
from .findings import (Adjudication, CoderAgreement, Codings, CodingDesign, CodingPlan, Coefficient, MeanScore, Prevalence, Regression, Robustness, Share, ShareDifference, cross_fit,
                       expected_scores, label_shares, mean_score, methods_text, plan_coding, prevalence, read_coding_design, read_coding_sheet, read_codings, regression, robustness, weighted_kappa,
                       write_coding_sheet)
from .errors import (AnnotationWarning, BaseModelWarning, ClosedError, ClusterError, CodingSampleWarning, ContextError, DeterminismWarning, FailedTextsWarning, GenerationError, InvalidArgumentError, LibraryMismatchError,
                     ModelLoadError, NewrllamaDeprecationWarning, NewrllamaError, TemplateError, TokenizeError)
from .engine.llama.model import Model
from .engine.sampling.params import SamplingParams
from .engine.step.results import Completion, GenerationStats
from .engine.policy import SchedulerConfig
from .runs.recording import Recording
from .engine.step.results import EngineStats
from .engine.llama.system import Device, SystemInfo, system_info
from .labels.validation import LabelScores, ReliabilityBin, Validation, validate
from .engine.calls.stream import TextStream

from .version import __version__

__all__ = [
    "Adjudication", "Agreement", "Annotation", "AnnotationPlan", "Annotations", "AnnotationTask", "AnnotationWarning", "AsyncTextStream", "BaseModelWarning", "Calibration", "Cascade", "CascadeChoice", "ClosedError", "Cluster", "CodingSampleWarning", "DeterminismWarning",
    "ClusterError", "ClusterStats", "CoderAgreement", "Codings", "CodingDesign", "CodingPlan", "Coefficient", "Completion", "Context", "ContextError", "Device",
    "EngineStats", "FailedTextsWarning", "GenerationError", "GenerationStats", "InvalidArgumentError", "LabelScores",
    "LibraryMismatchError", "MeanScore", "Model", "ModelLoadError", "NewrllamaDeprecationWarning", "NewrllamaError", "Prevalence", "RecommendedModel", "Recording", "Regression", "ReliabilityBin", "Robustness",
    "SamplingParams", "SchedulerConfig", "Share", "ShareDifference", "SystemInfo", "TemplateError", "TextStream", "TokenizeError",
    "Validation", "agreement", "annotate", "calibrate", "choose_cascade_share", "cross_fit", "default_model_path", "expected_scores", "generate_parallel", "label_shares", "least_confident",
    "mean_score", "methods_text", "plan_annotation", "plan_coding", "prevalence", "read_coding_design", "recommended_models", "read_coding_sheet", "read_codings", "regression", "robustness", "system_info", "validate",
    "weighted_kappa", "write_coding_sheet",
]
