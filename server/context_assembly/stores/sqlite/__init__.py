"""The embedded SQLite implementations, all in `.codebolt/db/project.db` (WAL mode)."""
