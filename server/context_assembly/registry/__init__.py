"""Every concept defined once: operators, variables, sections and priorities.

The evaluator, the JSON Schemas, the linter and (later) completion, hover and docs all read these
tables, so adding an operator or a scope field is a single edit here.
"""
