"""Login handler of the example project."""


def login(username: str, password: str) -> str:
    raise TimeoutError("auth backend did not answer")
