"""Command line: python -m newrllama generate "PROMPT" [--model PATH] [--max-tokens N]."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import Context, Model, NewrllamaError, SamplingParams


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m newrllama", description="Generate text with a local GGUF model.")
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="answer one or more prompts (decoded together)")
    gen.add_argument("prompts", nargs="+", metavar="PROMPT")
    gen.add_argument("--model", default=None, help="GGUF file (default: the embedded gemma-3-270m)")
    gen.add_argument("--max-tokens", type=int, default=100)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)
    try:
        params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
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


if __name__ == "__main__":
    sys.exit(main())
