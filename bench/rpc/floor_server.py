"""The start-up floor for bench/rpc: a pygls server that only answers `initialize` (and shutdown/exit)."""

from pygls.lsp.server import LanguageServer

server = LanguageServer("floor", "0")

if __name__ == "__main__":
    server.start_io()
