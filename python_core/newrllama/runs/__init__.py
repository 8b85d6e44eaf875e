"""Recorded runs, below the engine: the results files that a killed run resumes from, the recording options that
say where a run writes, and the Job interface that generation and annotation implement."""
