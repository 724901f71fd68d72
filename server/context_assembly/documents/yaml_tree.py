from .document import ParsedDocument


def parse_yaml(text: str) -> ParsedDocument: raise NotImplementedError
