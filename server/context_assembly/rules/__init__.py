"""Rule evaluation: variable lookup, condition compilation, evaluation and explanation, dialects."""
