"""Counters of what the server served, and their Prometheus text (llama-server's names where they fit).

Token counters count what was answered to clients (a cancelled answer counts what
it had generated), so they match the usage fields the clients received; engine
figures (decode calls, busy time) come from the context's engine thread."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from ..scheduler import EngineStats


@dataclass
class ServerMetrics:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    predicted_tokens: int = 0
    requests: Counter = field(default_factory=Counter)  # (route, HTTP status) -> count
    in_flight: int = 0  # requests admitted and not yet answered

    def served(self, usage: Dict[str, Any]) -> None:
        """Adds the usage a client received (see openai_response.usage)."""
        self.prompt_tokens += usage["prompt_tokens"]
        self.cached_tokens += usage["prompt_tokens_details"]["cached_tokens"]
        self.predicted_tokens += usage["completion_tokens"]

    def render(self, engine: EngineStats, kv_cells_used: int) -> str:
        busy = engine.t_step_s
        rows: List[Tuple[str, str, str, float]] = [
            ("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", self.prompt_tokens),
            ("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
             self.predicted_tokens),
            ("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s (over engine busy time).",
             (self.prompt_tokens - self.cached_tokens) / busy if busy > 0 else 0.0),
            ("llamacpp:predicted_tokens_seconds", "gauge",
             "Average generation throughput in tokens/s (over engine busy time).",
             self.predicted_tokens / busy if busy > 0 else 0.0),
            ("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls.", engine.n_steps),
            ("llamacpp:requests_processing", "gauge", "Number of requests processing.", engine.n_running),
            ("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", engine.n_waiting),
            ("llamacpp:kv_cache_tokens", "gauge", "KV cells held by running requests.", kv_cells_used),
            ("newrllama:cached_prompt_tokens_total", "counter", "Prompt tokens served by the prefix cache.",
             self.cached_tokens),
            ("newrllama:engine_busy_seconds_total", "counter", "Seconds the engine spent in decode steps.", busy),
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
