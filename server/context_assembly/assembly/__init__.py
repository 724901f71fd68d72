"""Context assembly: the seven stages from a request to a token-budgeted, traced context."""
