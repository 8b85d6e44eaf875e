"""Turns a caller's prompts and parameters into the Requests of one Call.

Everything that can be checked before any work is checked here, in the caller's
thread: argument types raise InvalidArgumentError; a prompt that cannot run
(empty, not tokenizable, outside the vocabulary, longer than a sequence) gets its
error result at once and is never submitted, so it cannot disturb the batch."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple, Union

from ...columns import column_values
from ...errors import InvalidArgumentError, NewrllamaError
from ..llama.model import check_token_list, encode_text
from ..step.samplers import c_sampling_params, prompt_seed
from ..step.choices import ChoiceScoring, LabelSet
from ..sampling.params import SamplingParams
from ..kv.prefix_cache import shared_start_lengths, token_key
from ..step.request import Call, Request
from ..llama.vocab import Vocab

Prompt = Union[str, bytes, Sequence[int]]
ParamsArg = Union[SamplingParams, Sequence[SamplingParams], None]
MAX_PROMPTS = 2**26 - 1


def normalize_params(params: ParamsArg, n_prompts: int) -> List[SamplingParams]:
    if params is None:
        return [SamplingParams()] * n_prompts
    if isinstance(params, SamplingParams):
        return [params] * n_prompts
    if isinstance(params, (str, bytes)) or not isinstance(params, Sequence):
        raise InvalidArgumentError("params must be a SamplingParams or a list with one per prompt")
    items = list(params)
    if len(items) != n_prompts:
        raise InvalidArgumentError(f"params has {len(items)} entries for {n_prompts} prompts; give one per prompt")
    for i, p in enumerate(items):
        if not isinstance(p, SamplingParams):
            raise InvalidArgumentError(f"params[{i}] must be a SamplingParams, got {type(p).__name__}")
    return items


def check_prompts(prompts: object) -> Sequence[Prompt]:
    prompts = column_values(prompts, "prompts", "str")
    if len(prompts) > MAX_PROMPTS:
        raise InvalidArgumentError(f"too many prompts in one call: {len(prompts)} (at most {MAX_PROMPTS})")
    return prompts


def check_prompt_kind(prompt: object, index: int) -> Union[bytes, List[int]]:
    """The prompt as UTF-8 bytes or a list of token ids; raises for a prompt of the wrong kind."""
    if prompt is None:
        raise InvalidArgumentError(f"prompts[{index}] is None; every prompt must be a str (or a list of token ids)")
    if isinstance(prompt, (str, bytes)):
        return encode_text(prompt, f"prompts[{index}]")
    tokens = check_token_list(prompt, f"prompts[{index}]")
    if not tokens:
        raise InvalidArgumentError(f"prompts[{index}] is an empty token list")
    return tokens


def tokens_or_error(vocab: Vocab, prompt: Prompt, index: int) -> Union[List[int], str]:
    """The prompt's tokens, or why it cannot run. Raises for arguments of the wrong kind."""
    checked = check_prompt_kind(prompt, index)
    if isinstance(checked, bytes):
        if not checked:
            return "prompt is empty"
        try:
            tokens = vocab.tokenize(checked)
        except NewrllamaError as exc:
            return str(exc)
        return tokens if tokens else "prompt is empty after tokenization"
    tokens = checked
    n_vocab = vocab.n_vocab
    for i, t in enumerate(tokens):
        if not 0 <= t < n_vocab:
            return f"token {t} at index {i} is outside the vocabulary [0, {n_vocab})"
    return tokens


def _parsed_grammars(vocab: Vocab, plist: List[SamplingParams]):
    """Each distinct grammar parsed once (by params id), for the samplers of every prompt it constrains; a grammar
    that does not parse raises, naming a prompt."""
    grammars = {}
    for i, p in enumerate(plist):
        if p.gbnf is not None and id(p) not in grammars:
            try:
                grammars[id(p)] = vocab.parse_grammar(p.gbnf)
            except NewrllamaError as exc:
                what = "json_schema" if p.json_schema is not None else "grammar"
                raise InvalidArgumentError(f"the {what} of prompt {i} (params[{i}]): {exc}") from None
    return grammars


def ends_in_a_word(vocab: Vocab, prompt: Prompt, tokens: List[int]) -> bool:
    """Whether the prompt's text ends in something other than whitespace (then a label follows a space).
    Token prompts are judged by their last token's text, so a prompt reads the same either way."""
    if isinstance(prompt, (str, bytes)):
        text = prompt.decode("utf-8", "replace") if isinstance(prompt, bytes) else prompt
    else:
        text = vocab.piece(tokens[-1]).decode("utf-8", "replace") if tokens else ""
    return bool(text) and not text[-1].isspace()


def prepare_call(vocab: Vocab, n_ctx_seq: int, prompts: Sequence[Prompt], params: ParamsArg,
                 prefix_cache: bool = False) -> Tuple[Call, List[Request]]:
    prompts = check_prompts(prompts)
    plist = normalize_params(params, len(prompts))
    checked = [tokens_or_error(vocab, p, i) for i, p in enumerate(prompts)]
    call = Call(len(prompts))
    c_params = {id(p): c_sampling_params(p) for p in plist}  # plist keeps every p alive, so ids are distinct
    grammars = _parsed_grammars(vocab, plist)
    label_sets: Dict[Tuple[int, bool, Tuple[int, ...]], LabelSet] = {}
    requests = []
    repeats: Dict[bytes, int] = {}  # by prompt key
    for i, tokens in enumerate(checked):
        p = plist[i]
        choice = None
        if p.choices is not None and not isinstance(tokens, str):
            key = (id(p), ends_in_a_word(vocab, prompts[i], tokens), vocab.answer_ends.after(tokens))
            if key not in label_sets:
                label_sets[key] = LabelSet(p.choices, vocab.label_tokens(p.choices, key[1]), key[2])
            choice = ChoiceScoring(label_sets[key])
        if isinstance(tokens, str):
            call.failed_early(i, 0, tokens)
        elif len(tokens) + (choice.longest if choice else 0) >= n_ctx_seq:
            answer = "its longest label" if choice else "the answer"
            call.failed_early(i, len(tokens), (
                f"prompt has {len(tokens)} tokens but a sequence holds at most {n_ctx_seq} (n_ctx / n_seq_max) "
                f"including {answer} (a cached shared prefix counts too); use a larger n_ctx or a smaller n_seq_max"))
        else:
            key = token_key(tokens)  # made here, in the caller's thread: the engine compares keys
            repeat = repeats.get(key, 0)
            repeats[key] = repeat + 1
            request = Request(call, i, tokens, key, p, c_params[id(p)], prompt_seed(p, tokens, repeat), n_ctx_seq,
                              vocab.piece, choice=choice, grammar=grammars.get(id(p)))
            call.requests[i] = request
            requests.append(request)
    if prefix_cache and len(requests) > 1:
        for request, lengths in zip(requests, shared_start_lengths([r.key for r in requests])):
            request.shared = lengths
    return call, requests
