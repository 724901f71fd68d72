"""Where things live under `<root>/.codebolt/` (SPEC §2), named once for every component."""

from __future__ import annotations

from pathlib import Path

from attrs import field, frozen

# kind of definition file -> the WorkspaceLayout property naming its folder
DEFINITION_DIRS: dict[str, str] = {
    "rule-engine": "rule_engines_dir",
    "context-rules": "context_rules_dir",
    "persistent-memory": "persistent_memory_dir",
    "ingestion-pipeline": "ingestion_dir",
    "graph-view": "graph_views_dir",
    "rule-test": "tests_dir",
}
# kind of a single definition file -> the WorkspaceLayout property naming it (an editor document,
# read by load_settings rather than the loader's directory walk)
DEFINITION_FILES: dict[str, str] = {
    "settings": "settings_path",
}


@frozen
class WorkspaceLayout:
    """The paths of one workspace; nothing here touches the file system."""

    root: Path = field(converter=Path)

    @property
    def codebolt(self) -> Path:
        return self.root / ".codebolt"

    @property
    def rule_engines_dir(self) -> Path:
        return self.codebolt / "context-rule-engines"

    @property
    def context_rules_dir(self) -> Path:
        return self.codebolt / "ContextRuleEngine"

    @property
    def persistent_memory_dir(self) -> Path:
        return self.codebolt / "PersistentMemory"

    @property
    def ingestion_dir(self) -> Path:
        return self.codebolt / "MemoryIngestion"

    @property
    def tests_dir(self) -> Path:
        return self.codebolt / "tests"

    @property
    def db_path(self) -> Path:
        return self.codebolt / "db" / "project.db"

    @property
    def memory_dir(self) -> Path:
        return self.codebolt / "memory"

    @property
    def snapshots_dir(self) -> Path:
        return self.memory_dir / "context"

    @property
    def vectordb_dir(self) -> Path:
        return self.codebolt / "vectordb"

    @property
    def kuzu_dir(self) -> Path:
        return self.codebolt / "knowledgegraph" / "kuzu"

    @property
    def graph_views_dir(self) -> Path:
        return self.codebolt / "knowledgegraph" / "views"

    @property
    def settings_path(self) -> Path:
        return self.codebolt / "context-assembly.json"

    @property
    def locks_dir(self) -> Path:
        return self.codebolt / ".locks"

    def directory_of(self, kind: str) -> Path:
        """The folder of a kind of definition file (`DEFINITION_DIRS`)."""
        folder: Path = getattr(self, DEFINITION_DIRS[kind])
        return folder
