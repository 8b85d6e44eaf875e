"""The OpenAI-compatible server, started as `python -m newrllama serve`, driven by clients no one here wrote:
the official openai package and plain HTTP (httpx, raw sockets)."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import newrllama
from helpers.oracle import MARGIN, worst_gap
from helpers.server_process import ServerProcess

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytestmark = pytest.mark.slow  # server processes: the fast lane (-m "not slow") leaves them out

N_SEQ = 16
CAPITALS = {"France": "Paris", "Italy": "Rome", "Japan": "Tokyo", "Spain": "Madrid"}


def capital_prompt(country: str) -> str:
    return f"The capital of Germany is Berlin. The capital of Egypt is Cairo. The capital of {country} is"


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--n-seq-max", str(N_SEQ), "--n-ctx", str(N_SEQ * 512), "--threads", "2") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0) as c:
        yield c


def open_completion(server, body: dict) -> socket.socket:
    """A completion request sent over a bare socket, which the test can close while the answer is running."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
    return sock


def closed_while_running(server, sock: socket.socket) -> int:
    """Closes the client's connection while its one prompt runs; the engine steps it took to stop."""
    at_close = server.metrics()
    assert at_close["newrllama:prompts_running"] == 1
    sock.close()
    idle = wait_for_idle(server)
    assert idle["newrllama:prompts_running"] == 0 and idle["newrllama:kv_cells_running"] == 0
    return idle["newrllama:engine_steps_total"] - at_close["newrllama:engine_steps_total"]


def wait_for_idle(server, timeout=10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        m = server.metrics()
        if (m["newrllama:prompts_running"] == 0 and m["newrllama:kv_cells_running"] == 0) or \
                time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def test_models_and_health(server, client):
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    assert [m.id for m in client.models.list().data] == ["gemma-3-270m"]


def test_completion_through_the_openai_client(client, model):
    r = client.completions.create(model="any", prompt=capital_prompt("France"), max_tokens=3, temperature=0)
    assert r.object == "text_completion" and len(r.choices) == 1
    assert "Paris" in r.choices[0].text and r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len(model.tokenize(capital_prompt("France")))
    assert r.usage.completion_tokens == 3 and r.usage.total_tokens == r.usage.prompt_tokens + 3


def test_several_prompts_and_n_in_one_request(client):
    prompts = [capital_prompt(c) for c in CAPITALS]
    r = client.completions.create(model="any", prompt=prompts, max_tokens=3, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    for choice, capital in zip(r.choices, CAPITALS.values()):
        assert capital in choice.text
    sampled = client.completions.create(model="any", prompt="Once upon a time", max_tokens=12, temperature=1.0,
                                        seed=7, n=3)
    assert len(sampled.choices) == 3 and len({c.text for c in sampled.choices}) > 1
    again = client.completions.create(model="any", prompt="Once upon a time", max_tokens=12, temperature=1.0,
                                      seed=7, n=3)
    assert [c.text for c in again.choices] == [c.text for c in sampled.choices]


def test_chat_and_streaming_give_the_same_text(client):
    messages = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "Name a large city in France."}]
    whole = client.chat.completions.create(model="any", messages=messages, max_tokens=16, temperature=0)
    assert whole.object == "chat.completion" and whole.choices[0].message.role == "assistant"
    chunks = list(client.chat.completions.create(model="any", messages=messages, max_tokens=16, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_streamed_completion_over_plain_http_ends_with_done(server):
    body = {"prompt": capital_prompt("Japan"), "max_tokens": 8, "temperature": 0, "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line[len("data: "):] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "Tokyo" in "".join(c["choices"][0]["text"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_constraints_choices_grammar_and_json_schema(client):
    r = client.completions.create(model="any", prompt=capital_prompt("Italy"), max_tokens=5,
                                  extra_body={"choices": ["Paris", "Rome", "Madrid"]})
    choice = r.choices[0].model_dump()
    assert choice["text"] == "Rome" and set(choice["choice_probs"]) == {"Paris", "Rome", "Madrid"}
    g = client.completions.create(model="any", prompt="Is the sky blue? Answer:", max_tokens=5, temperature=0,
                                  extra_body={"grammar": 'root ::= ("yes" | "no") "."'})
    assert g.choices[0].text in ("yes.", "no.")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}
    j = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Give a city as JSON."}], max_tokens=40, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}})
    assert isinstance(json.loads(j.choices[0].message.content)["city"], str)


def test_values_that_change_nothing_and_metadata_are_accepted(client):
    """What clients send by default or when replaying an answer: OpenAI's features at the value that asks
    for nothing, null for any field, and the metadata fields; the answer is the plain request's."""
    prompt = capital_prompt("Spain")
    plain = client.completions.create(model="any", prompt=prompt, max_tokens=3, temperature=0)
    noops = client.completions.create(
        model="any", prompt=prompt, max_tokens=3, temperature=0, best_of=1, n=1, echo=False, logprobs=None,
        suffix="", presence_penalty=0, frequency_penalty=0.0, logit_bias={}, user="someone",
        stream_options={"include_usage": True}, extra_body={"audio": None, "metadata": {"run": "7"}})
    assert noops.choices[0].text == plain.choices[0].text
    messages = [{"role": "user", "content": "Name a city in Spain."}]
    first = client.chat.completions.create(model="any", messages=messages, max_tokens=6, temperature=0)
    replayed = messages + [{"role": "assistant", "content": first.choices[0].message.content, "refusal": None,
                            "tool_calls": [], "annotations": [], "audio": None, "function_call": None},
                           {"role": "user", "content": [{"type": "text", "text": "Another one?"}]}]
    plain = client.chat.completions.create(model="any", messages=replayed, max_tokens=6, temperature=0)
    noops = client.chat.completions.create(
        model="any", messages=replayed, max_tokens=6, temperature=0, tools=[], tool_choice="none",
        functions=[], function_call="none", logprobs=False, top_logprobs=0, modalities=["text"], store=False,
        service_tier="auto", metadata={"run": "7"}, user="someone", safety_identifier="hash",
        parallel_tool_calls=None, audio=None, prediction=None, reasoning_effort=None,
        stream_options={"include_usage": True, "include_obfuscation": False})
    assert noops.choices[0].message.content == plain.choices[0].message.content


REFUSED_FIELDS = [  # (route, field or message fields, value, the param the error names)
    ("/v1/completions", "best_of", 2, "best_of"), ("/v1/completions", "echo", True, "echo"),
    ("/v1/completions", "logprobs", 0, "logprobs"), ("/v1/completions", "logprobs", 2, "logprobs"),
    ("/v1/completions", "suffix", " end.", "suffix"), ("/v1/completions", "logit_bias", {"1": 5}, "logit_bias"),
    ("/v1/completions", "presence_penalty", 0.5, "presence_penalty"),
    ("/v1/completions", "temprature", 0.5, "temprature"),  # a misspelt name is not ignored either
    ("/v1/completions", "messages", [{"role": "user", "content": "x"}], "messages"),
    ("/v1/completions", "max_completion_tokens", 5, "max_completion_tokens"),
    ("/v1/completions", "user", 42, "user"), ("/v1/completions", "model", 7, "model"),
    ("/v1/completions", "stream_options", {"include_obfuscation": True}, "stream_options"),
    ("/v1/completions", "stream_options", {"chunk_size": 4}, "stream_options"),
    ("/v1/chat/completions", "tool_choice", "auto", "tool_choice"),
    ("/v1/chat/completions", "tools", [{"type": "function", "function": {"name": "f"}}], "tools"),
    ("/v1/chat/completions", "function_call", "auto", "function_call"),
    ("/v1/chat/completions", "functions", [{"name": "f"}], "functions"),
    ("/v1/chat/completions", "parallel_tool_calls", False, "parallel_tool_calls"),
    ("/v1/chat/completions", "modalities", ["text", "audio"], "modalities"),
    ("/v1/chat/completions", "audio", {"voice": "alloy", "format": "wav"}, "audio"),
    ("/v1/chat/completions", "prediction", {"type": "content", "content": "x"}, "prediction"),
    ("/v1/chat/completions", "reasoning_effort", "low", "reasoning_effort"),
    ("/v1/chat/completions", "web_search_options", {}, "web_search_options"),
    ("/v1/chat/completions", "store", True, "store"), ("/v1/chat/completions", "service_tier", "flex", "service_tier"),
    ("/v1/chat/completions", "logprobs", True, "logprobs"), ("/v1/chat/completions", "top_logprobs", 2, "top_logprobs"),
    ("/v1/chat/completions", "metadata", "run 7", "metadata"), ("/v1/chat/completions", "prompt", "x", "prompt"),
    ("/v1/chat/completions", "best_of", 2, "best_of"),
    ("/v1/chat/completions", "messages", [{"role": "user", "content": "x", "name": "bob"}], "messages"),
    ("/v1/chat/completions", "messages", [{"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]}],
     "messages"),
    ("/v1/chat/completions", "messages", [{"role": "user", "content": [{"type": "text", "text": "x", "cache": 1}]}],
     "messages"),
]


def test_every_other_field_is_refused_naming_it(server, client):
    bodies = {"/v1/completions": {"prompt": "Hi", "max_tokens": 2},
              "/v1/chat/completions": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for route, field, value, param in REFUSED_FIELDS:
            r = http.post(route, json={**bodies[route], field: value})
            assert r.status_code == 400, (route, field, value, r.text)
            error = r.json()["error"]
            assert error["param"] == param and error["type"] == "invalid_request_error", (field, error)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                       tools=[{"type": "function", "function": {"name": "now", "parameters": {}}}],
                                       tool_choice="auto")
    assert refused.value.param in ("tools", "tool_choice") and "not supported" in refused.value.message


def test_grammars_over_a_bound_are_a_400_naming_it(server, client):
    """A grammar that would overflow llama.cpp's parser's stack (it took the server down) and a schema
    nested too deep are refused before parsing, naming the bound and the field."""
    deep_grammar = "root ::= " + "(" * 30000 + '"a"' + ")" * 30000
    schema: dict = {"type": "string"}
    for _ in range(200):
        schema = {"type": "array", "items": schema}
    cases = [({"grammar": deep_grammar}, "grammar", "NEWRLLAMA_GRAMMAR_MAX_NESTING"),
             ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}},
              "response_format", "MAX_SCHEMA_NESTING")]
    for extra, param, bound in cases:
        r = httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2, **extra}, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text[:300]
        assert bound in r.json()["error"]["message"]
    assert server.process.poll() is None
    assert "Paris" in client.completions.create(model="any", prompt=capital_prompt("France"), max_tokens=3,
                                                temperature=0).choices[0].text


def test_concurrent_requests_get_their_own_answers_in_one_batch(server, client):
    before = server.metrics()["newrllama:engine_steps_total"]
    answers = {}

    def ask(country):
        r = client.completions.create(model="any", prompt=capital_prompt(country), max_tokens=24, temperature=0)
        answers[country] = r.choices[0].text

    threads = [threading.Thread(target=ask, args=(c,)) for c in CAPITALS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for country, capital in CAPITALS.items():
        assert capital in answers[country], answers
    # Four answers of 24 tokens decoded one by one take ~100 steps; together ~30.
    assert server.metrics()["newrllama:engine_steps_total"] - before < 60


def test_the_same_request_twice_among_other_clients_gives_the_same_bits(server, client):
    """A server is one long-lived context: a request answered alone and again while other clients' requests
    share its steps (and its start sits in the prefix cache) gets the same tokens, and the same label
    probabilities."""
    prompt = "Here is a short story about a lighthouse keeper:"
    labels = {"choices": ["sea", "city", "forest"]}

    def ask(c, p, extra=None):
        return c.completions.create(model="any", prompt=p, max_tokens=24, temperature=0, extra_body=extra)

    first = ask(client, prompt)
    first_label = ask(client, capital_prompt("Spain"), labels)
    others = [f"A recipe for {s} soup:" for s in ("tomato", "onion", "lentil", "pea", "corn")]
    with ThreadPoolExecutor(8) as pool:
        busy = [pool.submit(ask, client, p) for p in others]
        again = pool.submit(ask, client, prompt)
        again_label = pool.submit(ask, client, capital_prompt("Spain"), labels)
        for f in busy:
            f.result()
        again, again_label = again.result(), again_label.result()
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    assert again.choices[0].text == first.choices[0].text
    assert again_label.model_dump()["choices"][0] == first_label.model_dump()["choices"][0]


def test_a_client_killed_mid_stream_frees_its_sequence(server):
    counting = "1, 2, 3, 4, 5, 6,"
    # Left alone, the answer runs to its max_tokens (greedy counting has no end): whatever stops it sooner
    # below is the disconnect.
    alone = httpx.post(f"{server.url}/v1/completions", json={"prompt": counting, "max_tokens": 160, "temperature": 0},
                       timeout=300).json()
    assert alone["choices"][0]["finish_reason"] == "length"
    sock = open_completion(server, {"prompt": counting, "max_tokens": 2000, "temperature": 0, "stream": True})
    received = b""
    while received.count(b"data: ") < 3:
        received += sock.recv(4096)
    # It stopped within a few steps of the disconnect, long before the 160 tokens it runs alone.
    assert closed_while_running(server, sock) < 80
    # The next N_SEQ requests still run N_SEQ wide.
    before = server.metrics()["newrllama:engine_steps_total"]

    async def burst():
        async with httpx.AsyncClient(base_url=server.url, timeout=300) as http:
            return await asyncio.gather(*[http.post("/v1/completions", json={
                "prompt": f"{k}: " + capital_prompt(c), "max_tokens": 20, "temperature": 0})
                for k in range(N_SEQ // len(CAPITALS)) for c in CAPITALS])

    answers = asyncio.run(burst())
    assert len(answers) == N_SEQ and all(r.status_code == 200 for r in answers)
    # One by one, 16 answers of 20 tokens take ~336 decode calls; side by side, about 21.
    assert server.metrics()["newrllama:engine_steps_total"] - before < 40


def test_a_client_gone_before_its_answer_frees_its_sequence(server):
    """A client that closes its connection while waiting for a whole (not streamed) answer: the server notices
    within a moment and cancels the prompt, rather than running it to its 2000 tokens for no one."""
    sock = open_completion(server, {"prompt": "1, 2, 3, 4, 5, 6,", "max_tokens": 2000, "temperature": 0})
    deadline = time.monotonic() + 60
    while server.metrics()["newrllama:prompts_running"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert closed_while_running(server, sock) < 80


def hostile_requests():
    """(method, path, body bytes or JSON, headers): malformed, mistyped, absurd, oversized, misrouted."""
    good = {"prompt": "Hi", "max_tokens": 2}
    bad_values = {"max_tokens": [-1, 0, 10**12, "5", 2.5, True], "temperature": [-1, -0.5, "hot", float("nan")],
                  "top_p": [-0.1, 2, [1]], "top_k": [-5, 1.5], "seed": [-7, 2**70, "x"], "n": [0, 17, 10**6],
                  "stop": [[""], [1, 2], ["a"] * 100, {"a": 1}], "stream": ["yes", 1], "logprobs": [5],
                  "choices": [[], ["a"], ["a", "a"], ["x"] * 10000, "ab", ["a", "b\u0000"]],
                  "grammar": ["", "root ::= (", 'x ::= "a"', 42], "response_format": [{"type": "xml"}, "json",
                                                                                     {"type": "json_schema"}],
                  "presence_penalty": [1.0], "prompt": [None, 5, [], [[]], [None], "a\u0000b", [-1, 2**40],
                                                        "word " * 20000]}
    cases = []
    for name, values in bad_values.items():
        for v in values:
            cases.append(("POST", "/v1/completions", {**good, name: v}, {}))
    for messages in [None, [], [{"role": "wizard", "content": "x"}], [{"role": "user"}], [{"role": "user", "content": 5}],
                     [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}], "hello"]:
        cases.append(("POST", "/v1/chat/completions", {"messages": messages}, {}))
    for raw in [b"", b"{", b"[1, 2]", b"null", b'"text"', b"\xff\xfe", b"[" * 100000 + b"]" * 100000,
                b'{"prompt": "a", "max_tokens": 1' + b" " * 100]:
        cases.append(("POST", "/v1/completions", raw, {"content-type": "application/json"}))
    cases.append(("POST", "/v1/completions", b"x" * (9 * 1024 * 1024), {"content-type": "application/json"}))
    for method, path in [("GET", "/v1/completions"), ("DELETE", "/v1/models"), ("GET", "/v2/nothing"),
                         ("POST", "/health"), ("GET", "/../../etc/passwd"), ("PUT", "/v1/chat/completions")]:
        cases.append((method, path, None, {}))
    return cases


def test_hostile_requests_get_4xx_json_and_change_nothing(server, client):
    cases = hostile_requests()
    statuses = []
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for round_ in range(3):
            for method, path, body, headers in cases:
                if not isinstance(body, (bytes, type(None))):  # json.dumps writes NaN, as careless clients do
                    body, headers = json.dumps(body).encode(), {"content-type": "application/json"}
                r = http.request(method, path, content=body, headers=headers)
                statuses.append(r.status_code)
                assert 400 <= r.status_code < 500, (method, path, str(body)[:200], r.status_code, r.text[:300])
                assert "error" in r.json() or "detail" in r.json(), r.text[:300]
    assert len(statuses) >= 200
    with socket.create_connection(("127.0.0.1", server.port)) as sock:  # a length no client library would send
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n{}")
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
    idle = wait_for_idle(server)
    assert idle["newrllama:kv_cells_running"] == 0 and idle["newrllama:prompts_running"] == 0
    assert server.process.poll() is None
    ok = client.completions.create(model="any", prompt=capital_prompt("France"), max_tokens=3, temperature=0)
    assert "Paris" in ok.choices[0].text


def test_metrics_count_what_was_served(server, client):
    """Every figure of /metrics against what the clients received and what was run: usage summed, the
    engine's steps (one per generated token, one more where the end of generation came) and its time."""
    before = wait_for_idle(server)
    before_text = httpx.get(server.url + "/metrics").text
    usages = []
    started = time.monotonic()
    notes = "Notes on rivers, mills, bridges and the towns that grew around them in the valley. " * 4
    for prompt in [*map(capital_prompt, CAPITALS), notes, notes]:  # the second notes come from the prefix cache
        usages.append(client.completions.create(model="any", prompt=prompt, max_tokens=5, temperature=0).usage)
    chunks = list(client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Hello"}],
                                                 max_tokens=6, stream=True, stream_options={"include_usage": True}))
    usages.append(chunks[-1].usage)
    elapsed = time.monotonic() - started
    after = server.metrics()
    text = httpx.get(server.url + "/metrics").text
    assert "llamacpp:" not in text  # llama-server's names would promise its meanings

    def grew(name):
        return after[f"newrllama:{name}"] - before[f"newrllama:{name}"]

    assert grew("prompt_tokens_total") == sum(u.prompt_tokens for u in usages)
    assert grew("cached_prompt_tokens_total") == sum(u.prompt_tokens_details.cached_tokens for u in usages) > 0
    generated = sum(u.completion_tokens for u in usages)
    assert grew("completion_tokens_total") == generated
    assert generated <= grew("engine_steps_total") <= generated + len(usages)
    assert 0 < grew("engine_step_seconds_total") < elapsed
    for name in ("prompts_running", "prompts_waiting", "kv_cells_running", "requests_in_flight"):
        assert after[f"newrllama:{name}"] == 0, name

    def answered(text, route):
        line = f'newrllama:http_requests_total{{route="{route}",status="200"}} '
        return next((int(row[len(line):]) for row in text.splitlines() if row.startswith(line)), 0)

    assert answered(text, "/v1/completions") - answered(before_text, "/v1/completions") == len(CAPITALS) + 2
    assert answered(text, "/v1/chat/completions") - answered(before_text, "/v1/chat/completions") == 1
    for row in text.splitlines():
        if row.startswith("# HELP "):
            assert len(row.split(" ", 3)[3]) > 20, row  # every figure says what it is


def test_api_key_and_a_full_queue():
    """Another server: a key is required, and with one sequence and no queue a second request gets 503."""
    with ServerProcess("--n-seq-max", "1", "--max-queue", "0", "--api-key", "s3cret", "--threads", "2") as s:
        with openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()
        assert httpx.get(s.url + "/health").status_code == 200  # health needs no key

        async def two():
            async with httpx.AsyncClient(base_url=s.url, timeout=60,
                                         headers={"Authorization": "Bearer s3cret"}) as http:
                first = asyncio.ensure_future(http.post("/v1/completions", json={"prompt": "Once", "max_tokens": 60}))
                await asyncio.sleep(0.3)
                second = await http.post("/v1/completions", json={"prompt": "Twice", "max_tokens": 5})
                return await first, second

        first, second = asyncio.run(two())
        assert first.status_code == 200
        assert second.status_code == 503 and second.headers["retry-after"] == "1"
        assert second.json()["error"]["type"] == "server_error"


def test_a_missing_or_broken_model_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="(?s)exited with 1.*no model file"):
        ServerProcess("--model", str(tmp_path / "missing.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match="unhealthy.*not a GGUF model file"):
        ServerProcess("--model", str(bad))


def test_health_is_503_until_the_model_is_loaded():
    """The application before its startup (no model loaded yet), driven in-process over ASGI."""
    from newrllama.server import ServerConfig, create_app

    async def probe():
        app = create_app(ServerConfig())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as http:
            return await http.get("/health"), await http.post("/v1/completions", json={"prompt": "a"})

    health, completion = asyncio.run(probe())
    assert health.status_code == 503 and health.json() == {"status": "loading"}
    assert completion.status_code == 503 and completion.headers["retry-after"] == "1"


def test_a_prompt_too_long_is_the_callers_400(server):
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "word " * 600, "max_tokens": 2}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text
    assert "a sequence holds at most 512" in r.json()["error"]["message"]


def test_a_decode_failure_is_the_servers_500():
    """llama_decode failing (the context's test hook, aimed at the one sequence) through the application in
    process: a 500 of type server_error, streamed or not, and the next request is served."""
    from newrllama.server import ServerConfig, create_app

    async def run():
        app = create_app(ServerConfig(n_seq_max=1, n_ctx=512, n_threads=2))
        async with app.router.lifespan_context(app):
            engine = app.state.engine
            while engine.ctx is None:
                assert engine.error is None
                await asyncio.sleep(0.05)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x",
                                         timeout=60) as http:
                answers = []
                for stream in (False, True):
                    engine.ctx._inject_decode_failure(after_n_decodes=1, seq_id=0)
                    answers.append(await http.post("/v1/completions", json={
                        "prompt": "Once upon a time", "max_tokens": 4, "stream": stream}))
                answers.append(await http.post("/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 4}))
                return answers

    whole, streamed, after = asyncio.run(run())
    for r in (whole, streamed):
        assert r.status_code == 500, r.text
        error = r.json()["error"]
        assert error["type"] == "server_error" and "llama_decode failed" in error["message"]
    assert after.status_code == 200 and after.json()["usage"]["completion_tokens"] == 4


def test_each_turn_of_a_chat_reuses_the_turn_before(client):
    """The server keeps what a request decoded: the next turn, which repeats it, decodes only what is new."""
    messages = [{"role": "user", "content": "Here are some notes about rivers, mills, bridges and the towns that "
                                            "grew around them in the valley. Tell me a story that uses them."}]
    previous = None
    for turn in range(5):
        r = client.chat.completions.create(model="any", messages=messages, max_tokens=12, temperature=0)
        cached = r.usage.prompt_tokens_details.cached_tokens
        if previous is not None:
            assert cached >= previous.prompt_tokens, (turn, cached, previous)
            assert r.usage.prompt_tokens - cached <= previous.completion_tokens + 20  # the answer, the new question
        previous = r.usage
        messages += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": f"Go on ({turn})."}]


def test_without_the_prefix_cache_every_request_decodes_in_full(client, model, reference_llama):
    """--no-prefix-cache: concurrent requests that share a long start each decode it, and answer with the bits
    of the server with the cache, and as llama-cpp-python decodes the prompt alone (up to its rounding)."""
    start = "Notes on rivers, mills, bridges and the towns that grew around them in the valley. " * 4
    prompts = [start + f"Question {k}: which town came first?" for k in range(4)]
    with ServerProcess("--n-seq-max", "4", "--n-ctx", "2048", "--threads", "2", "--no-prefix-cache") as s:
        with openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0) as plain:
            def ask(c, prompt):
                return c.completions.create(model="any", prompt=prompt, max_tokens=6, temperature=0)
            with ThreadPoolExecutor(4) as pool:
                alone = list(pool.map(lambda p: ask(plain, p), prompts))
    assert all(r.usage.prompt_tokens_details.cached_tokens == 0 for r in alone)
    shared = [ask(client, p) for p in prompts]
    assert sum(r.usage.prompt_tokens_details.cached_tokens for r in shared) > 0
    assert [r.choices[0].text for r in shared] == [r.choices[0].text for r in alone]
    for prompt, r in zip(prompts, alone):
        answer = model.tokenize(r.choices[0].text, add_special=False)
        assert len(answer) == r.usage.completion_tokens == 6
        assert worst_gap(reference_llama, model.tokenize(prompt), answer) <= MARGIN, (prompt, r.choices[0].text)


def test_the_models_id_is_its_name_or_its_file_stem():
    """A recommended model served by name keeps its whole name (its dots are not a suffix); a file gives its stem."""
    from newrllama.server import ServerConfig
    from newrllama.server.served_engine import Engine
    assert Engine(ServerConfig(model_path="qwen2.5-coder-1.5b-instruct")).name == "qwen2.5-coder-1.5b-instruct"
    assert Engine(ServerConfig(model_path="/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")).name == \
        "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert Engine(ServerConfig(model_path="/m/x.gguf", model_name="mine")).name == "mine"
