"""The published JSON Schemas (Draft 2020-12), generated from the registries.

`python -m context_assembly.schemas --write DIR` writes them; `--check DIR` fails when the files
differ from what the registries generate.
"""

from .build import SCHEMA_NAMES, all_schemas, build_schema, check_files, file_name, render, write_files
from .fragments import schema_id
from .sources import Sources
from .validate import clear_caches, registry, too_deep, validation_errors, validator

__all__ = [
    "SCHEMA_NAMES", "Sources", "all_schemas", "build_schema", "check_files", "clear_caches", "file_name",
    "registry", "render", "schema_id", "too_deep", "validation_errors", "validator", "write_files",
]
