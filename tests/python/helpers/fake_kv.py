"""A KV store without a model (engine/kv/kv_store.py's interface): what each sequence holds, as token lists."""
from typing import Dict, List


class FakeKv:
    def __init__(self) -> None:
        self.seqs: Dict[int, List[int]] = {}
        self.copies = 0

    def copy(self, src: int, dst: int, n_tokens: int) -> None:
        held = self.seqs.get(src, [])
        self.seqs[dst] = list(held if n_tokens < 0 else held[:n_tokens])
        assert n_tokens < 0 or len(self.seqs[dst]) == n_tokens, "copied more than the source holds"
        self.copies += 1

    def clear(self, seq: int) -> None:
        self.seqs[seq] = []
