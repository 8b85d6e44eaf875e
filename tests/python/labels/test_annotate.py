"""annotate(): valid labels for every text, prompts that share their instruction, failures that stay alone."""
from __future__ import annotations

import warnings

import pytest

import newrllama

LABELS = ["sports", "business", "weather"]
TEXTS = ["The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
         None, "Heavy rain and strong winds are expected tomorrow.", "   "]


def test_every_text_gets_a_valid_label_or_a_reason(model):
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        instruction = "Give the topic of the news text: what it is mainly about, not what it mentions in passing. " * 2
        failed = r"2 of 5 texts failed \(first: text 2, text is missing or empty\)"
        with pytest.warns(newrllama.AnnotationWarning, match=failed):
            results = newrllama.annotate(TEXTS, LABELS, instruction, context=ctx)
        assert [r.error is None for r in results] == [True, True, False, True, False]
        for r in (results[0], results[1], results[3]):
            assert r.label in LABELS and max(r.probs, key=r.probs.get) == r.label
            assert sum(r.probs.values()) == pytest.approx(1.0)
        assert results[2].label is None and "missing" in results[2].error
        # The instruction and the labels come first: the texts share them through the prefix cache.
        assert ctx.last_stats.n_cached_tokens > 0


def test_a_context_is_made_when_none_is_given():
    results = newrllama.annotate(TEXTS[:2], LABELS, n_seq_max=2, n_threads=2)
    assert all(r.label in LABELS for r in results)


def test_annotate_prompt_uses_the_chat_template_or_plain_text(model):
    from newrllama.labels.codebook import check_codebook
    book = check_codebook(LABELS, "")
    system = book.system_text()
    assert system.startswith("Classify the text.")
    story = "The home side scored twice in the last minutes of the cup final and took the trophy. " * 2
    prompt = book.prompt(model, story)
    # The instruction, then the text, then the labels: a text's listing orders share all but the list.
    assert prompt.index("Classify the text.") < prompt.index(story) < prompt.index("sports, business, weather")
    assert prompt.endswith("<start_of_turn>model\n")
    # A text shorter than two lists comes after the list: the list is decoded once per call and order.
    short = book.prompt(model, "hello")
    assert short.index("Classify the text.") < short.index("sports, business, weather") < short.index("hello")
    defined = check_codebook({"sports": "games and matches", "business": "", "weather": ""}, "")
    assert defined.prompt(model, "hello").index("hello") < defined.prompt(model, "hello").index("sports, business")

    class NoTemplate:  # a model without a chat template, as a base GGUF may be
        def apply_chat_template(self, messages):
            raise newrllama.TemplateError("this model has no chat template")

        def tokenize(self, text):
            return text.split()
    with_example = check_codebook(LABELS, "", None, [("a match", "sports")])
    listing = "Answer with exactly one of these labels: sports, business, weather."
    plain = with_example.prompt(NoTemplate(), "hello", "turns")
    assert plain == f"{system}\n{listing}\n\nText: a match\nLabel: sports\n\nText: hello\nLabel:"
    assert with_example.prompt(NoTemplate(), "hello") == (  # the examples in the system text, the default
        f"Classify the text.\nExamples:\nText: a match\nLabel: sports\n{listing}\n\nText: hello\nLabel:")
    assert with_example.prompt(NoTemplate(), story) == (
        f"Classify the text.\nExamples:\nText: a match\nLabel: sports\n\nText: {story}\n\n{listing}\nLabel:")


def test_the_order_the_labels_are_given_in_changes_nothing(model):
    runs = []
    for labels in (LABELS, LABELS[::-1], [LABELS[1], LABELS[2], LABELS[0]]):
        with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
            runs.append(newrllama.annotate(TEXTS, labels, "Give the topic of the news text.", context=ctx))
    for run in runs[1:]:  # the same prompts and scores; only the sums run over the labels in another order
        assert [a.label for a in run] == [a.label for a in runs[0]]
        for a, b in zip(run, runs[0]):
            assert a.probs == (pytest.approx(b.probs, rel=1e-12) if b.probs else None)
            assert a.raw_probs == (pytest.approx(b.raw_probs, rel=1e-12) if b.raw_probs else None)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        as_given = newrllama.annotate(TEXTS, LABELS[::-1], "Give the topic of the news text.", debias="none", context=ctx)
    assert [a.raw_probs for a in as_given] != [a.raw_probs for a in runs[0]]


def test_contextual_calibration_scores_each_text_once_against_content_free_texts(model):
    """debias="contextual": each text once in the sorted order, each label's probability divided by its mean over
    the content-free texts under the same prompt; a text's figures depend neither on the other texts nor on the
    order the labels were given in."""
    from newrllama.labels.codebook import check_codebook
    from newrllama.labels.order_bias import CONTENT_FREE, sorted_labels
    runnable = [t for t in TEXTS if t and t.strip()]
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        out = newrllama.annotate(TEXTS, LABELS, "Give the topic.", debias="contextual", context=ctx)
        assert ctx.last_stats.n_prompts == len(runnable) + len(CONTENT_FREE)  # the texts share one layout
        base = sorted_labels(LABELS)
        book = check_codebook(list(base), "Give the topic.")
        choices = newrllama.SamplingParams(choices=list(base))
        blank = [c.choice_probs for c in ctx.generate_parallel([book.prompt(model, t, "system", True)
                                                                for t in CONTENT_FREE], choices)]
        mean = {label: sum(p[label] for p in blank) / len(blank) for label in base}
        for text, a in zip(runnable, [a for a in out if a.error is None]):
            raw = ctx.generate_parallel([book.prompt(model, text)], choices)[0].choice_probs
            assert a.raw_probs == pytest.approx(raw, rel=1e-12) and a.order_flip is None  # re-normalised
            ratio = {label: raw[label] / mean[label] for label in base}
            assert a.probs == pytest.approx({label: v / sum(ratio.values()) for label, v in ratio.items()}, rel=1e-9)
        alone = newrllama.annotate([TEXTS[3]], LABELS, "Give the topic.", debias="contextual", context=ctx)
        assert alone[0].probs == out[3].probs and alone[0].label == out[3].label
        # Listed in another order: the same scores, summed over the labels in that order.
        reordered = newrllama.annotate([TEXTS[3]], LABELS[::-1], "Give the topic.", debias="contextual", context=ctx)
        assert reordered[0].probs == pytest.approx(out[3].probs, rel=1e-12)


def test_the_default_debias_is_contextual_for_a_text_after_the_list_and_reverse_for_a_longer_one(model):
    """debias="auto" (the default): a text short enough for the list-first layout is scored once with contextual
    calibration, a longer one in the list's two orders; each gets the very figures of that method, whichever texts
    share its call."""
    from newrllama.labels.order_bias import CONTENT_FREE
    short, long = TEXTS[0], " ".join([TEXTS[1]] * 6)
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        mixed = newrllama.annotate([short, long, None], LABELS, "Give the topic.", context=ctx)
        assert ctx.last_stats.n_prompts == 1 + 2 + len(CONTENT_FREE)
        contextual = newrllama.annotate([short], LABELS, "Give the topic.", debias="contextual", context=ctx)
        reverse = newrllama.annotate([long], LABELS, "Give the topic.", debias="reverse", context=ctx)
        alone = [newrllama.annotate([t], LABELS, "Give the topic.", context=ctx)[0] for t in (short, long)]
        newrllama.annotate([short], {label: f"news about {label}" for label in LABELS}, "Give the topic.", context=ctx)
        assert ctx.last_stats.n_prompts == 2, "definitions put the list after the text: two orders"
        asked = newrllama.annotate([short], codebook={"topic": LABELS, "tone": ["calm", "excited"]}, context=ctx)
        assert ctx.last_stats.n_prompts == 4, "a codebook's questions come after the text: two orders each"
        assert all(a.order_flip is not None for a in asked[0].values())
    assert mixed[0].order_flip is None and mixed[1].order_flip is not None and mixed[2].error
    assert (mixed[0].probs, mixed[0].raw_probs) == (contextual[0].probs, contextual[0].raw_probs)
    assert (mixed[1].probs, mixed[1].raw_probs) == (reverse[0].probs, reverse[0].raw_probs)
    assert [a.probs for a in alone] == [mixed[0].probs, mixed[1].probs]
    assert {a.provenance.debias for a in mixed[:2]} == {"auto"}


@pytest.mark.parametrize("kwargs,message", [
    ({"texts": "one text", "labels": LABELS}, "list of str"), ({"texts": ["a"], "labels": ["x"]}, "2 to 1024"),
    ({"texts": ["a"], "labels": None}, "labels .*or codebook"), ({"texts": ["a"], "labels": ["x", "x"]}, "more than once"),
    ({"texts": ["a"], "labels": LABELS, "instruction": 3}, "instruction"),
    ({"texts": ["a"], "labels": LABELS, "context": "ctx"}, "Context"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(newrllama.InvalidArgumentError, match=message):
        newrllama.annotate(**kwargs)


@pytest.mark.slow
def test_order_flip_says_whether_the_label_changed_between_the_orders_scored(model):
    """order_flip is the comparison of the per-order winners (checked against debias="none" in each order); a call
    whose labels change with the order on many texts warns."""
    texts = [t for t in TEXTS if t and t.strip()] * 8
    with newrllama.Context(model, n_ctx=4096, n_seq_max=4, n_threads=2) as ctx:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", newrllama.AnnotationWarning)
            both = newrllama.annotate(texts, LABELS, "Give the topic of the news text.", debias="reverse",
                                      context=ctx)
        each = [newrllama.annotate(texts, order, "Give the topic of the news text.", debias="none", context=ctx)
                for order in (sorted(LABELS), sorted(LABELS)[::-1])]
        one = newrllama.annotate(texts, LABELS, "Give the topic of the news text.", debias="none", context=ctx)
    expected = [a.label != b.label for a, b in zip(*each)]
    assert [a.order_flip for a in both] == expected
    assert all(a.order_flip is None for a in one)
    flipped = sum(expected)
    assert any("changed with the listing order" in str(w.message) for w in seen) == (flipped >= 0.1 * len(texts))


def test_labels_that_collapse_or_follow_the_order_are_named():
    from newrllama.labels.annotation import suspect_labels
    probs = {"a": 0.6, "b": 0.4}
    same = [newrllama.Annotation("a", probs, order_flip=False)] * 20
    assert suspect_labels(same) == ["20 of 20 texts got the label 'a': the model may not be telling the labels apart "
                                    "(check the instruction and the definitions; validate() on a coded sample tells)"]
    mixed = [newrllama.Annotation("a" if i % 3 else "b", probs, order_flip=i < 2) for i in range(20)]
    assert suspect_labels(mixed) == ["the label changed with the listing order on 2 of 20 texts (Annotation.order_flip): "
                                     "those labels rest on where the labels stand in the list"]
    assert suspect_labels(mixed[2:]) == [] and suspect_labels(same[:19]) == []
    v = newrllama.validate([a.label for a in mixed], ["a"] * 20, order_flip=[a.order_flip for a in mixed])
    assert v.order_flip_share == 0.1
    assert newrllama.validate(["a", "b"], ["a", "a"], order_flip=[None, None]).order_flip_share is None
    with pytest.raises(newrllama.InvalidArgumentError, match="order_flip must be a list of 2"):
        newrllama.validate(["a", "b"], ["a", "a"], order_flip=[True])


def test_each_prompt_and_each_label_is_tokenized_once(model, monkeypatch):
    """Without a context, the prompts' tokens size the context and go to the call; the labels' tokens size it
    and score every prompt."""
    labels = {"wet": "rain, snow or storms", "dry": "sun or drought"}  # definitions: the text is not measured alone
    newrllama.annotate(TEXTS[:1], LABELS, debias="reverse", model=model, n_seq_max=2, n_threads=2)  # warm-up
    asked = []
    tokenize = model.vocab.tokenize
    monkeypatch.setattr(model.vocab, "tokenize", lambda data, add_special=True: asked.append((data, add_special)) or
                        tokenize(data, add_special))
    texts = [TEXTS[3], "A dry and sunny week lies ahead."]
    results = newrllama.annotate(texts, labels, debias="reverse", model=model, n_seq_max=2, n_threads=2)
    assert all(r.label in labels for r in results)
    prompts = [data for data, special in asked if special]  # labels are tokenized without special tokens
    assert len(prompts) == len(set(prompts)) == len(texts) * 2  # two listing orders per text
    assert sorted(data.strip() for data, special in asked if not special) == [b"dry", b"wet"]
