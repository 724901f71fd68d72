"""What the editor features advertise before any of them runs: the code action kinds, the semantic
token legend and the commands. Kept apart from the features (which import the whole engine) so that
a server answers `initialize` from these names alone."""

from __future__ import annotations

QUICKFIX = "quickfix"
REWRITE = "refactor.rewrite"
CODE_ACTION_KINDS = (QUICKFIX, REWRITE)

TOKEN_TYPES = ("operator", "variable", "type", "enumMember")  # index = the token type in the data
TOKEN_MODIFIERS = ("declaration",)

RUN_TEST = "contextAssembly.runTest"
EVALUATE_RULE = "contextAssembly.evaluateRule"
COMMANDS = (RUN_TEST, EVALUATE_RULE)
