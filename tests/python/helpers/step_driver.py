"""Drives the C step primitives through cffi: a greedy sampler, one step over slots, a sequence's positions, and
a greedy continuation one step at a time."""
from __future__ import annotations

from newrllama._capi import ffi, lib


def greedy_sampler(ctx):
    params = ffi.new("newrllama_sampling_params *", {"max_tokens": 1, "top_p": 1.0, "penalty_repeat": 1.0})
    out = ffi.new("newrllama_sampler_handle *")
    assert lib.newrllama_sampler_create(ctx.handle, params, 0, out, ffi.NULL) == lib.NEWRLLAMA_OK
    return out[0]


def step(ctx, spans):
    """spans: (seq, pos, tokens, sampler-or-NULL) per slot. Returns (code, decode code, slots, keep-alive)."""
    slots = ffi.new("newrllama_slot[]", len(spans))
    keep = []
    for i, (seq, pos, tokens, sampler) in enumerate(spans):
        buf = ffi.new("int32_t[]", tokens)
        keep.append(buf)
        slots[i].seq_id, slots[i].pos, slots[i].tokens, slots[i].n_tokens = seq, pos, buf, len(tokens)
        slots[i].sampler = sampler
    rc = ffi.new("int32_t *")
    err = ffi.new("const char **")
    code = lib.newrllama_step(ctx.handle, slots, len(spans), rc, err)
    return code, rc[0], slots, keep, (ffi.string(err[0]).decode() if err[0] != ffi.NULL else "")


def pos_range(ctx, seq):
    lo, hi = ffi.new("int32_t *"), ffi.new("int32_t *")
    assert lib.newrllama_seq_pos_range(ctx.handle, seq, lo, hi, ffi.NULL) == lib.NEWRLLAMA_OK
    return lo[0], hi[0]


def greedy_continuation(ctx, tokens, n, seq=0, fail_at=None):
    """Prefills tokens on seq, then decodes n greedy tokens one step at a time; fail_at injects a
    failed decode before that generated token. Returns the tokens and the statuses of failed steps."""
    sampler = greedy_sampler(ctx)
    statuses = []
    try:
        code, _, slots, _, _ = step(ctx, [(seq, 0, tokens, sampler)])
        assert code == lib.NEWRLLAMA_OK
        out = [slots[0].token]
        pos = len(tokens)
        while len(out) < n:
            if fail_at == len(out):
                ctx._inject_decode_failure(1, -1, -3)
                code, rc, slots, _, _ = step(ctx, [(seq, pos, [out[-1]], sampler)])
                assert code == lib.NEWRLLAMA_ERROR_DECODE and rc == -3
                statuses.append(slots[0].status)
                assert pos_range(ctx, seq)[1] == pos - 1  # the failed token left nothing behind
            code, _, slots, _, _ = step(ctx, [(seq, pos, [out[-1]], sampler)])
            assert code == lib.NEWRLLAMA_OK
            out.append(slots[0].token)
            pos += 1
        return out, statuses
    finally:
        lib.newrllama_sampler_free(sampler)
        lib.newrllama_seq_clear(ctx.handle, seq, ffi.NULL)
