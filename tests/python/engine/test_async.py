"""The asyncio API: agenerate, agenerate_parallel, astream; cancellation frees sequences at once."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import newrllama
from helpers.samples import FRANCE

GREEDY = newrllama.SamplingParams(max_tokens=12)
LONG = newrllama.SamplingParams(max_tokens=400)


@pytest.fixture(scope="module")
def actx(model):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as c:
        yield c


def test_agenerate_gives_what_generate_gives(actx):
    expected = actx.generate(FRANCE, GREEDY)

    async def main():
        one = await actx.agenerate(FRANCE, GREEDY)
        many = await actx.agenerate_parallel([FRANCE, "1, 2, 3,"], GREEDY)
        return one, many

    one, many = asyncio.run(main())
    assert one.text == expected.text and one.finish_reason == expected.finish_reason
    assert many[0].text == expected.text and many[1].n_gen_tokens > 0


def test_astream_joins_to_the_answer_and_shares_the_batch(actx):
    async def main():
        stream = actx.astream(FRANCE, GREEDY)
        other = asyncio.ensure_future(actx.agenerate("1, 2, 3,", GREEDY))
        pieces = [p async for p in stream]
        return pieces, stream.completion, await other

    pieces, done, other = asyncio.run(main())
    assert len(pieces) > 1 and "".join(pieces) == done.text == actx.generate(FRANCE, GREEDY).text
    assert other.n_gen_tokens > 0


def test_cancelling_the_awaiting_task_frees_the_sequence(actx):
    async def main():
        task = asyncio.ensure_future(actx.agenerate_parallel([FRANCE] * 4, LONG))
        await asyncio.sleep(0.5)
        assert actx.n_used_cells() > 0
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        t0 = time.monotonic()
        while actx.n_used_cells() and time.monotonic() - t0 < 10:
            await asyncio.sleep(0.05)
        return time.monotonic() - t0

    assert asyncio.run(main()) < 5
    assert actx.n_used_cells() == 0
    assert actx.generate(FRANCE, GREEDY).finish_reason in ("stop", "length")


def test_closing_an_astream_early_cancels_only_it(actx):
    async def main():
        other = asyncio.ensure_future(actx.agenerate("1, 2, 3,", newrllama.SamplingParams(max_tokens=40)))
        async with actx.astream(FRANCE, LONG) as stream:
            async for _ in stream:
                break
        return await other

    assert asyncio.run(main()).n_gen_tokens == 40
    assert actx.n_used_cells() == 0


def test_astream_of_a_prompt_that_cannot_run_raises(actx):
    async def main():
        return [p async for p in actx.astream("word " * 5000, GREEDY)]

    with pytest.raises(newrllama.GenerationError, match="sequence holds at most"):
        asyncio.run(main())


def test_a_loop_that_ends_before_its_answer_does_not_hurt_the_engine(actx):
    """The engine thread hands results to a loop that is gone: ignored, and the engine goes on."""
    started = threading.Event()

    async def main():
        asyncio.ensure_future(actx.agenerate(FRANCE, newrllama.SamplingParams(max_tokens=60)))
        await asyncio.sleep(0.2)
        started.set()

    asyncio.run(main())  # cancels the pending task and closes the loop
    assert started.is_set()
    assert actx.generate(FRANCE, GREEDY).text == actx.generate(FRANCE, GREEDY).text
    assert actx.n_used_cells() == 0
