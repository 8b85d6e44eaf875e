"""A context's sequences as SequenceLayout plans them, without a model."""
import pytest

from newrllama import NewrllamaError
from newrllama.engine.policy import SchedulerConfig
from newrllama.engine.kv.sequence_layout import SequenceLayout


def test_cached_runs_and_scratch_sequences_share_what_n_batch_leaves_beside_the_prompts():
    config = SchedulerConfig(prefix_cache_sequences=32)
    assert SequenceLayout.requested(4096, 8, 512, True, config) == SequenceLayout(8, 32, 8, 512)
    # n_batch = 16 leaves 8 sequences beside 8 prompts: the cache takes them all, no label can be scored.
    assert SequenceLayout.requested(4096, 8, 16, True, config) == SequenceLayout(8, 8, 0, 16)
    assert SequenceLayout.requested(4096, 8, 16, False, config) == SequenceLayout(8, 0, 8, 16)
    # n_batch is at most n_ctx, and llama.cpp's 256 sequences bound the rest.
    assert SequenceLayout.requested(1024, 200, 4096, True, config) == SequenceLayout(200, 32, 24, 1024)
    assert SequenceLayout.requested(4096, 300, 512, True, config) == SequenceLayout(300, 0, 0, 512)


def test_the_made_layout_numbers_its_sequences_prompts_first_then_runs_then_scratch():
    layout = SequenceLayout.requested(4096, 4, 512, True, SchedulerConfig(prefix_cache_sequences=3))
    made = layout.made(4, 3 + 4, 512, 1024, 0)
    assert (made.n_sequences, made.first_cache_seq, made.scratch_seqs) == (11, 4, [10, 9, 8, 7])
    assert made.n_cells == 1024 * 7
    with pytest.raises(NewrllamaError, match="6 sequences beside"):
        layout.made(4, 6, 512, 1024, 0)
