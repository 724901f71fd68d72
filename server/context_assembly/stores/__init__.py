"""Memory stores: one interface per kind, embedded implementations (SQLite, files, Kuzu), URI layer."""
