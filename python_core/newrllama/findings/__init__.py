"""Findings: shares and coefficients with valid intervals from the model's labels and a hand-coded sample."""
from .prevalence import Prevalence, Share, ShareDifference, prevalence
from .regression import Coefficient, Regression, regression

__all__ = ["Coefficient", "Prevalence", "Regression", "Share", "ShareDifference", "prevalence", "regression"]
