"""The prefix cache's policy without a model: which runs it makes, what each sequence holds after the copies it
asks for, what it keeps and what it evicts. A fake KV store records every sequence's tokens; "decoding" a run
writes its tokens there, as a step would."""
from typing import List

from helpers.fake_kv import FakeKv
from newrllama.engine.policy import SchedulerConfig
from newrllama.engine.kv.prefix_cache import MIN_SHARED_TOKENS, PrefixCache, PrefixState, shared_start_lengths, token_key
from newrllama.engine.kv.sequence_layout import SequenceLayout

FIRST_SEQ = 10
INSTRUCTION = list(range(100, 130))  # 30 tokens


def make_cache(n_seqs: int = 4, n_swa: int = 0, kv: FakeKv = None) -> PrefixCache:
    layout = SequenceLayout(FIRST_SEQ, n_seqs, 0, n_batch=64, n_ctx_seq=1 << 16, n_swa=n_swa)
    return PrefixCache(kv or FakeKv(), layout, SchedulerConfig())


def decode(cache: PrefixCache, kv: FakeKv, p) -> None:
    """What steps do for a run: its own tokens after what it copied, then it is ready."""
    kv.seqs[p.seq] = list(kv.seqs.get(p.seq, [])[:p.n_past]) + list(p.tokens[p.n_past:p.n_tokens])
    p.n_past = p.n_tokens
    cache.prefix_ready(p)


def prompt(*parts: List[int]) -> List[int]:
    return [t for part in parts for t in part]


def test_prompts_waiting_together_get_nested_runs_each_decoding_only_its_own_tokens():
    kv = FakeKv()
    cache = make_cache(kv=kv)
    texts = [list(range(200, 212)), list(range(300, 312))]
    questions = [[1, 2, 3], [4, 5, 6]]
    prompts = [prompt(INSTRUCTION, t, q) for t in texts for q in questions]
    keys = [token_key(p) for p in prompts]
    starts = [cache.lookup(k, lengths) for k, lengths in zip(keys, shared_start_lengths(keys))]
    instruction = next(p for p in cache.entries if p.n_tokens == len(INSTRUCTION))
    text_runs = [p for p in cache.entries if p.parent is instruction]
    assert len(cache.entries) == 3 and len(text_runs) == 2
    assert all(p.state is PrefixState.AWAITING_PARENT and p.n_inherited == len(INSTRUCTION) for p in text_runs)
    assert cache.decoding() == [instruction]
    assert [n for _, n in starts] == [len(INSTRUCTION) + 12] * 4 and instruction.users == 2
    decode(cache, kv, instruction)  # the texts' runs copy it and decode only their text
    assert all(p.state is PrefixState.DECODING and p.n_past == len(INSTRUCTION) for p in text_runs)
    assert instruction.state is PrefixState.READY and sorted(cache.decoding(), key=id) == sorted(text_runs, key=id)
    assert all(kv.seqs[p.seq] == INSTRUCTION for p in text_runs)
    for p in text_runs:
        decode(cache, kv, p)
    assert sorted(kv.seqs[p.seq] for p in text_runs) == [prompt(INSTRUCTION, t) for t in texts]
    # Decoded once: the instruction is charged to one text run (and with it to its first prompt), not to both.
    assert instruction.uncharged == 0 and sorted(p.uncharged for p in text_runs) == [12, 12 + len(INSTRUCTION)]


def test_a_finished_prompts_run_serves_the_next_turn_and_is_kept_once():
    kv = FakeKv()
    cache = make_cache(kv=kv)
    turn = prompt(INSTRUCTION, [7, 8, 9])
    kv.seqs[0] = list(turn)  # a prompt's sequence at its end
    cache.keep(0, token_key(turn), None, 0)
    cache.keep(0, token_key(turn[:-1]), None, 0)  # served by the run kept already: not kept again
    assert len(cache.entries) == 1
    run, n = cache.lookup(token_key(prompt(turn, [10, 11])))
    assert run is not None and n == len(turn) and kv.seqs[run.seq] == turn and run.kept and run.reused


def test_eviction_takes_the_least_recently_used_idle_run_and_never_one_in_use():
    kv = FakeKv()
    cache = make_cache(n_seqs=2, kv=kv)
    runs = [prompt([k] * MIN_SHARED_TOKENS, INSTRUCTION) for k in range(3)]
    for r in runs[:2]:
        kv.seqs[0] = list(r)
        cache.keep(0, token_key(r), None, 0)
    used, _ = cache.lookup(token_key(prompt(runs[0], [1])))  # the first is used again: the second is older now
    cache.release(used)
    kv.seqs[0] = list(runs[2])
    cache.keep(0, token_key(runs[2]), None, 0)
    assert sorted(p.key for p in cache.entries) == sorted(token_key(r) for r in (runs[0], runs[2]))
    assert cache.n_evictions == 1
    held = [cache.lookup(token_key(prompt(r, [1])))[0] for r in (runs[0], runs[2])]  # both in use now
    kv.seqs[0] = list(runs[1])
    cache.keep(0, token_key(runs[1]), None, 0)
    assert sorted(p.key for p in cache.entries) == sorted(p.key for p in held) and cache.n_evictions == 1


def test_a_run_past_the_sliding_window_is_taken_whole_or_not_at_all():
    for n_swa, served in ((16, 0), (0, 12)):
        kv = FakeKv()
        cache = make_cache(n_swa=n_swa, kv=kv)
        kept = INSTRUCTION[:24]
        kv.seqs[0] = list(kept)
        cache.keep(0, token_key(kept), None, 0)
        run, n = cache.lookup(token_key(prompt(INSTRUCTION[:12], [1, 2, 3])))
        assert n == served and (run is None) == (served == 0), n_swa


def test_runs_made_ahead_for_prompts_that_went_away_are_dropped_and_their_sequences_freed():
    kv = FakeKv()
    cache = make_cache(n_seqs=2, kv=kv)
    key = token_key(prompt(INSTRUCTION, [1, 2]))
    made, complete = cache.prefetch(key, (len(INSTRUCTION),), n_free_cells=1 << 20)
    assert complete and len(made) == 1 and made[0].ahead and made[0].users == 0
    cache.drop_unclaimed()
    assert cache.entries == [] and kv.seqs[made[0].seq] == []
    again, _ = cache.prefetch(key, (len(INSTRUCTION),), n_free_cells=1 << 20)
    assert again[0].seq in (FIRST_SEQ, FIRST_SEQ + 1)
