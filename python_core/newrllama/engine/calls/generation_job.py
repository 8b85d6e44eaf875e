"""generate_parallel as a recorded run's job (runs/jobs.py): chunks of prompts with their parameters."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence, Tuple

from ...runs.jobs import digest
from ..sampling.params import SamplingParams
from .parallel import ParamsArg, check_prompt_kind, check_prompts, normalize_params
from ..step.results import Completion


def _params_fields(p: SamplingParams) -> dict:
    return {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.init}


class GenerationJob:
    """generate_parallel over the cluster: chunks of prompts with their parameters."""

    method = "generate_parallel"

    def __init__(self, prompts: object, params: ParamsArg) -> None:
        self.prompts = list(check_prompts(prompts))
        checked = [check_prompt_kind(p, i) for i, p in enumerate(self.prompts)]
        self.params = normalize_params(params, len(self.prompts))
        fields = {id(p): _params_fields(p) for p in self.params}
        self.digests = [digest(c.decode("utf-8", "surrogateescape") if isinstance(c, bytes) else c, fields[id(p)])
                        for c, p in zip(checked, self.params)]
        self.settings_digests = [digest(fields[id(p)]) for p in self.params]

    def __len__(self) -> int:
        return len(self.prompts)

    def payload(self, indices: Sequence[int]) -> Tuple[Any, ...]:
        params = [self.params[i] for i in indices]
        one = bool(params) and all(p is params[0] for p in params)
        return [self.prompts[i] for i in indices], params[0] if one else params

    def record(self, result: Completion) -> dict:
        out = {"text": result.text, "finish_reason": result.finish_reason, "error": result.error,
               "n_prompt_tokens": result.n_prompt_tokens, "n_gen_tokens": result.n_gen_tokens,
               "n_cached_tokens": result.n_cached_tokens}
        if result.choice_probs is not None:
            out["choice_probs"] = result.choice_probs
            out["choice_logprobs"] = result.choice_logprobs
        if result.engine_error:
            out["engine_error"] = True
        return out

    def from_record(self, record: dict) -> Completion:
        # The file keeps token counts, not token ids: a resumed prompt's token_ids are empty.
        return Completion(record["text"], [], record["finish_reason"], record.get("error"),
                          record.get("n_prompt_tokens", 0), record.get("n_gen_tokens", 0),
                          record.get("n_cached_tokens", 0), record.get("choice_probs"),
                          bool(record.get("engine_error", False)), record.get("choice_logprobs"))

    def failed(self, message: str) -> Completion:
        """A prompt the cluster could not run (its worker died, the run stopped): the engine's failure."""
        return Completion("", finish_reason="error", error=message, engine_error=True)

    def has_error(self, result: Completion) -> bool:
        return result.error is not None
