"""Counters of what the server served, and their Prometheus text, under newrllama's own names.

llama-server's names (llamacpp:*) would promise its meanings: prompt tokens it decoded,
throughput over prompt and over generation time, requests in slots. Ours differ (usage
as the clients received it, cached tokens included; one engine time for prompt and
generation together; prompts, not HTTP requests, in sequences), so they are named and
explained for what they are. Token counters count what was answered to clients (a
cancelled answer counts what it had generated), so they match the usage fields the
clients received; engine figures come from the context's engine thread. Throughput is
a ratio of two counters' rates, e.g. rate(newrllama:completion_tokens_total) /
rate(newrllama:engine_step_seconds_total)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from ..engine.step.results import EngineStats


@dataclass
class ServerMetrics:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    requests: Counter = field(default_factory=Counter)  # (route, HTTP status) -> count
    in_flight: int = 0  # requests admitted and not yet answered

    def served(self, usage: Dict[str, Any]) -> None:
        """Adds the usage a client received (see openai_response.usage)."""
        self.prompt_tokens += usage["prompt_tokens"]
        self.cached_tokens += usage["prompt_tokens_details"]["cached_tokens"]
        self.completion_tokens += usage["completion_tokens"]

    def render(self, engine: EngineStats, kv_cells_used: int) -> str:
        rows: List[Tuple[str, str, str, float]] = [
            ("newrllama:prompt_tokens_total", "counter",
             "Prompt tokens of the answers served (usage.prompt_tokens summed; cached ones included).",
             self.prompt_tokens),
            ("newrllama:cached_prompt_tokens_total", "counter",
             "Of those, the ones served by the prefix cache (usage.prompt_tokens_details.cached_tokens summed).",
             self.cached_tokens),
            ("newrllama:completion_tokens_total", "counter",
             "Tokens generated in the answers served (usage.completion_tokens summed).", self.completion_tokens),
            ("newrllama:engine_steps_total", "counter",
             "Engine steps: each decodes the next tokens of every running prompt in one batch.", engine.n_steps),
            ("newrllama:engine_step_seconds_total", "counter",
             "Seconds spent in engine steps (decoding and sampling), prompt and generation tokens together.",
             engine.t_step_s),
            ("newrllama:prompts_running", "gauge",
             "Prompts holding a sequence now (a request with several prompts, or n > 1, holds several).",
             engine.n_running),
            ("newrllama:prompts_waiting", "gauge", "Prompts submitted and waiting for a free sequence.",
             engine.n_waiting),
            ("newrllama:kv_cells_running", "gauge", "KV cache cells held by running prompts (cached prefixes aside).",
             kv_cells_used),
            ("newrllama:requests_in_flight", "gauge", "HTTP requests admitted and not yet answered.", self.in_flight),
        ]
        lines = []
        for name, kind, help_text, value in rows:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {_number(value)}"]
        name = "newrllama:http_requests_total"
        lines += [f"# HELP {name} HTTP requests answered, by route and status.", f"# TYPE {name} counter"]
        for (route, status), count in sorted(self.requests.items()):
            lines.append(f'{name}{{route="{route}",status="{status}"}} {count}')
        return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"
