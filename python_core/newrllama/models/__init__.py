"""Model files, below everything else that uses them: the embedded model and its package chunks, the recommended
models by name, downloads (URLs, hf:// addresses) with their checksums, GGUF sizing, and a model file's hash."""
