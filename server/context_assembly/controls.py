"""Characters that act rather than show: controls a terminal obeys and marks that reorder the text
after them. What people read of memory text (the command line's reports, the trace page) shows
them as escapes; each reader adds the C0 controls it must keep or may leave to its own encoder.
"""

from __future__ import annotations

C1 = "\x7f-\x9f"  # DEL and the C1 controls (ESC [ in one character: U+009B)
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks, embeddings, overrides, isolates
LINE_BREAKS = "\u2028\u2029"  # Unicode's line and paragraph separators: a line break to some readers
