"""`python -m context_assembly ...` = the `context-assembly` command."""

import sys

from .cli.main import main

sys.exit(main())
