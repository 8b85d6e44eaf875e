"""Past one machine: prompts sharded over Ray workers (the extra newrllama[cluster]).

Ray is imported only when a Cluster starts, so the rest of newrllama works without it."""
from .cluster import Cluster, ClusterStats

__all__ = ["Cluster", "ClusterStats"]
