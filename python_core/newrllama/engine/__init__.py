"""The engine: models, contexts and sampling parameters, and the scheduler that runs every caller's prompts in
one batch (admission policy, prefix cache, KV operations, label-path scoring, streams), over the C shim."""
