"""Findings: shares and coefficients with valid intervals from the model's labels and a hand-coded sample, how
many texts to code next, and the sheets they are coded on."""
from .coders import Adjudication, CoderAgreement, Codings
from .cross_fit import cross_fit
from .design import CodingDesign
from .methods import methods_text
from .multi_label import label_shares
from .ordinal import MeanScore, expected_scores, mean_score, weighted_kappa
from .plan import CodingPlan, plan_coding
from .prevalence import Prevalence, Share, ShareDifference, prevalence
from .regression import Coefficient, Regression, regression
from .robustness import Robustness, robustness
from .sheet import read_coding_sheet, read_codings, write_coding_sheet
from .sheet_design import read_coding_design

__all__ = ["Adjudication", "CoderAgreement", "Codings", "CodingDesign", "CodingPlan", "Coefficient", "MeanScore", "Prevalence", "Regression", "Robustness", "Share", "ShareDifference", "cross_fit", "expected_scores", "label_shares", "mean_score", "methods_text",
           "plan_coding", "prevalence", "read_coding_design", "read_coding_sheet", "read_codings", "regression", "robustness", "weighted_kappa", "write_coding_sheet"]
