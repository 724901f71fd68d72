"""The embedded knowledge graph on Kuzu (SPEC §11): `KuzuGraph` and the seed-data loader."""

from .graph import KuzuGraph, load_graph_json
from .session import SessionSettings

__all__ = ["KuzuGraph", "SessionSettings", "load_graph_json"]
