"""The PostgreSQL + pgvector backend: every store kind in one database many sidecars share."""
