"""llama.cpp's side of the engine: the model and its vocabulary (with what ends an answer), the C handles they
live in, what the build and the machine can do, and what a build holds of its numbers."""
