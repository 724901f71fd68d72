"""Editor intelligence over `.codebolt/` definition files (SPEC §9): pure functions over documents
and the workspace, answering in LSP shapes (plain dicts, camelCase keys) that the `lsp/` layer only
converts. Nothing here imports pygls or lsprotocol.

- `documents`: which files are definitions, the per-URI, per-version document cache, the workspace
  view with open (unsaved) documents laid over the disk;
- `diagnostics`: syntax → schema → meaning, with codes, links, quick-fix data and related places;
- `completion`, `hover`, `actions`, `navigation`: the interactive features.
"""
