"""Persistent-memory definitions (retrieval pipelines): normalisation and, later, the step runner."""
