"""The command line: thin commands that translate between a terminal and the layers below."""
