"""The callers' doors into the engine: Context (generate_parallel, streams, asyncio), a context sized for a call,
and a generation run as a recorded job."""
