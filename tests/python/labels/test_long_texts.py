"""annotate(too_long=): a text longer than a sequence fails with its length, or is cut from the end, the start or
the middle until it fits; the cut is counted per text, recorded and said in the methods paragraph."""
from __future__ import annotations

import json
import warnings

import pytest

import newrllama
from newrllama.labels.annotation_task import AnnotationTask
from newrllama.labels.text_fit import ELISION

LABELS = ["sports", "business"]
START = "The striker scored twice and the home team won the cup final in front of a full stadium."
END = "Shares of the bank fell sharply after it reported weak profits for the third quarter."
FILLER = " The report went on with more details of the day." * 60
LONG = START + FILLER + " " + END  # about 700 tokens: more than a sequence of 256 cells holds
SHORT = "Heavy rain is expected tomorrow."
SETTINGS = dict(n_ctx=512, n_seq_max=2, n_threads=2)


def annotate_quietly(texts, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", newrllama.AnnotationWarning)
        return newrllama.annotate(texts, LABELS, debias="reverse", **kwargs)


def test_a_long_text_fails_with_its_length_and_the_remedy_by_default(model):
    with newrllama.Context(model, **SETTINGS) as ctx:
        long, short = annotate_quietly([LONG, SHORT], context=ctx)
    assert long.label is None and "too_long='truncate_end'" in long.error and "sequence holds at most" in long.error
    assert short.label in LABELS and short.tokens_cut == 0


@pytest.mark.parametrize("rule", ["truncate_end", "truncate_start", "truncate_middle"])
def test_a_long_text_is_cut_where_the_rule_says_and_labelled_as_its_cut_text(model, rule):
    tokens = model.tokenize(LONG, add_special=False)
    with newrllama.Context(model, **SETTINGS) as ctx:
        long, short = annotate_quietly([LONG, SHORT], context=ctx, too_long=rule)
        assert long.label in LABELS and 0 < long.tokens_cut < len(tokens) and short.tokens_cut == 0
        keep = len(tokens) - long.tokens_cut
        head = {"truncate_end": keep, "truncate_start": 0, "truncate_middle": (keep + 1) // 2}[rule]
        cut = model.detokenize(tokens[:head])
        if rule == "truncate_middle":
            cut += ELISION
        cut += model.detokenize(tokens[len(tokens) - (keep - head):]) if keep > head else ""
        assert (START[:20] in cut) == (rule != "truncate_start") and (END[-20:] in cut) == (rule != "truncate_end")
        # The same bits as the cut text given whole: the model read exactly that text.
        (alone,) = annotate_quietly([cut], context=ctx)
    assert alone.tokens_cut == 0 and alone.probs == long.probs
    assert long.provenance.too_long == rule
    # Most of the sequence holds the text: the cut is sized to the prompt around it, not a fixed share.
    assert len(tokens) - long.tokens_cut > 100


def test_without_a_context_the_cut_fits_the_sequence_of_the_context_made_for_the_call(model):
    long, short = annotate_quietly([LONG, SHORT], model=model, too_long="truncate_end", **SETTINGS)
    assert long.label in LABELS and long.tokens_cut > 0 and short.tokens_cut == 0
    # Without a size given, the context made for the call holds the whole text.
    (whole,) = annotate_quietly([LONG], model=model, n_threads=2)
    assert whole.label in LABELS and whole.tokens_cut == 0


def test_the_cut_is_counted_in_the_table_the_record_and_the_methods_paragraph(model, tmp_path):
    output = tmp_path / "labels.jsonl"
    with newrllama.Context(model, **SETTINGS) as ctx:
        results = annotate_quietly([LONG, SHORT], context=ctx, too_long="truncate_middle", output=output)
    cut = results[0].tokens_cut
    assert [row["tokens_cut"] for row in results.rows()] == [cut, 0]
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(r["index"], r["tokens_cut"]) for r in sorted(records, key=lambda r: r["index"])] == [(0, cut), (1, 0)]
    with newrllama.Context(model, **SETTINGS) as ctx:
        resumed = annotate_quietly([LONG, SHORT], context=ctx, too_long="truncate_middle", output=output, resume=True)
    assert resumed[0].tokens_cut == cut and resumed[0].probs == results[0].probs
    paragraph = newrllama.methods_text(results)
    assert ("Texts longer than the model's context held were cut to fit, by tokens (their middles were left out): "
            f"1 of 2 texts, {cut} tokens in all, at most {cut} from one text.") in paragraph


def test_a_prompt_with_no_room_for_the_text_fails_it_and_not_the_call(model):
    instruction = "Read the text and give its topic. " * 60  # longer than a sequence on its own
    with newrllama.Context(model, **SETTINGS) as ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore", newrllama.AnnotationWarning)
        (long,) = newrllama.annotate([LONG], LABELS, instruction, debias="reverse", context=ctx,
                                     too_long="truncate_end")
    assert long.label is None and "no part of the text fits" in long.error


def test_a_rule_that_does_not_exist_is_refused_and_the_rule_changes_what_a_resume_matches():
    with pytest.raises(newrllama.InvalidArgumentError, match="too_long must be one of 'error', 'truncate_end'"):
        AnnotationTask(LABELS, too_long="cut")
    default, cut = AnnotationTask(LABELS), AnnotationTask(LABELS, too_long="truncate_end")
    assert default.digests(["a text"]) != cut.digests(["a text"])
