"""Files of models and of runs, below the engine: downloads and the embedded model, GGUF sizing, model hashes,
and results files that a killed run resumes from (the Job interface that generation and annotation implement)."""
