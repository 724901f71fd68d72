"""Context Assembly Server: rules, memory pipelines and token-budgeted context for LLM agents."""

__version__ = "0.1.0"
