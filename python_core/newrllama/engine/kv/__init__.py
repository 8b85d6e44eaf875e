"""The KV cache: the context's sequences and how they are laid out, the C operations on them, and the prefix cache
of prompt starts kept in some of them."""
