"""An OpenAI-compatible HTTP server over one Context (the extra newrllama[server]: FastAPI and uvicorn).

    python -m newrllama serve --port 8080 --n-seq-max 16
"""
from .app import create_app
from .served_engine import ServerConfig

__all__ = ["ServerConfig", "create_app"]
