"""Sampling parameters: their one table (name, type, default, range) and the checked SamplingParams."""
