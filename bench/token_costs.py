"""What one token costs a model, counted from its GGUF file's tensors: the weight bytes a decode step reads and
the weight matrices' multiply-adds a prefill token needs."""
from __future__ import annotations

from pathlib import Path
from typing import List

from newrllama.models.gguf_size import GgufTensor, gguf_tensors

EMBEDDINGS, OUTPUT = "token_embd.weight", "output.weight"


def decode_bytes_per_token(path: Path) -> int:
    """Bytes of weights one decode step of one sequence reads: every tensor once, except the token embeddings,
    of which it reads one row, where the model has an output matrix of its own (where it has none, the
    embeddings are the output matrix and read whole)."""
    ts = gguf_tensors(path)
    separate_output = any(t.name == OUTPUT for t in ts)
    return sum(t.n_bytes for t in ts if not (t.name == EMBEDDINGS and separate_output))


def matmul_macs_per_token(path: Path, n_prompt: int) -> float:
    """Multiply-adds of the weight matrices per prompt token in a prefill of n_prompt tokens: every 2-D weight
    once per token, the output matrix once per prompt (the logits of its last token only), the embeddings not at
    all (a row lookup) unless they are the output matrix. Attention's own products are left out."""
    ts: List[GgufTensor] = gguf_tensors(path)
    output = OUTPUT if any(t.name == OUTPUT for t in ts) else EMBEDDINGS
    per_token = sum(t.n_elements for t in ts if len(t.shape) == 2 and t.name not in (EMBEDDINGS, OUTPUT))
    return per_token + next(t.n_elements for t in ts if t.name == output) / n_prompt
