"""Command line: python -m newrllama generate "PROMPT" [--model PATH] [--max-tokens N];
python -m newrllama serve [--model PATH] [--host 127.0.0.1] [--port 8080] [--n-seq-max 16] ..."""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import Context, Model, NewrllamaError, SamplingParams
from .models.catalog import is_fetched
from .engine.sampling.sampling_table import SAMPLING_FIELDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m newrllama", description="Generate text with a local GGUF model.")
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="answer one or more prompts (decoded together)")
    gen.add_argument("prompts", nargs="+", metavar="PROMPT")
    gen.add_argument("--model", default=None,
                     help="GGUF file, recommended model name, URL or hf://owner/repo/file.gguf "
                          "(default: the embedded gemma-3-270m)")
    for f in SAMPLING_FIELDS:  # every sampling setting, with the library's default
        gen.add_argument("--" + f.name.replace("_", "-"), type=f.kind, default=f.default,
                         help=f"{f.range_text()} (default: {f.default})")
    serve = commands.add_parser("serve", help="an OpenAI-compatible HTTP server (needs newrllama[server])")
    serve.add_argument("--model", default=None,
                       help="GGUF file, recommended model name, URL or hf://owner/repo/file.gguf "
                            "(default: the embedded gemma-3-270m)")
    serve.add_argument("--model-name", default=None, help="the id clients see (default: the file name)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--n-seq-max", type=int, default=16, help="requests decoded together")
    serve.add_argument("--n-ctx", type=int, default=None, help="KV cells in all (default: 2048 per sequence)")
    serve.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    serve.add_argument("--api-key", default=os.environ.get("NEWRLLAMA_API_KEY"),
                       help="require 'Authorization: Bearer KEY' (default: $NEWRLLAMA_API_KEY, else none)")
    serve.add_argument("--max-queue", type=int, default=256, help="requests waiting beyond the running ones")
    serve.add_argument("--no-prefix-cache", dest="prefix_cache", action="store_false",
                       help="share no prompt starts: every request decodes its whole prompt")
    serve.add_argument("--batch-invariant", action=argparse.BooleanOptionalAction, default=True,
                       help="a request's answer and probabilities are the same bits whatever other requests share "
                            "its steps (default: bf16 KV cells); --no-batch-invariant keeps llama.cpp's f16 cells, "
                            "faster on long prompts")
    serve.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    try:
        params = SamplingParams(**{f.name: getattr(args, f.name) for f in SAMPLING_FIELDS})
        with Model(args.model) as model, Context(model, n_seq_max=min(len(args.prompts), 16)) as ctx:
            completions = ctx.generate_parallel(args.prompts, params)
    except NewrllamaError as exc:
        print(f"newrllama: error: {exc}", file=sys.stderr)
        return 1
    status = 0
    for c in completions:
        if c.error:
            print(f"newrllama: error: {c.error}", file=sys.stderr)
            status = 1
        else:
            print(c.text)
    return status


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from .server import ServerConfig, create_app
    except ImportError as exc:
        print(f"newrllama: error: the server needs its extra ({exc.name} is missing): "
              "pip install 'newrllama[server]'", file=sys.stderr)
        return 1
    for name in ("n_seq_max", "threads", "n_ctx", "max_queue"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "max_queue" else 1):
            print(f"newrllama: error: --{name.replace('_', '-')} must be positive, got {value}", file=sys.stderr)
            return 2
    if args.model is not None and not is_fetched(args.model) and not os.path.isfile(args.model):
        print(f"newrllama: error: no model file at {args.model}", file=sys.stderr)
        return 1
    config = ServerConfig(model_path=args.model, n_seq_max=args.n_seq_max, n_ctx=args.n_ctx, n_threads=args.threads,
                          api_key=args.api_key, max_queue=args.max_queue, model_name=args.model_name,
                          prefix_cache=args.prefix_cache, batch_invariant=args.batch_invariant)
    uvicorn.run(create_app(config), host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
