"""The engine: models, contexts and sampling parameters, and the scheduler that runs every caller's prompts in
one batch, over the C shim. Its rooms, each importing only those before it: llama/ (the model and the machine),
sampling/ (the parameters), kv/ (sequences, KV operations, the prefix cache), step/ (requests, the step, the
scheduler, label paths), calls/ (Context and the callers' doors); policy.py, the scheduler's numbers and queue,
lies below them all (docs/design/layers.md)."""
