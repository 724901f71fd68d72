"""The JSON-RPC sidecar: pygls wiring only (SPEC §8).

`server.build_server()` makes the language server: lifecycle, the custom methods of
`context_assembly.methods` registered once (`calls`), settings (`config`), file watching (`watch`);
`transports` serves it over stdio, TCP or WebSocket with the tolerant `framing` and the plain-JSON
`protocol`. Editor features plug in the same way: a module with `register(server)`.
"""
