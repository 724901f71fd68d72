"""Rule tests (beyond the seeds): files under `.codebolt/tests/` holding cases of a request and
what the rules — or the whole assembly — must do with it; the runner, coverage and the results.

Nothing here knows about terminals or JSON-RPC: `cli/test.py` and `methods/testing.py` print or
return what `run_tests` answers.
"""

from .cases import TestCase, TestFile, load_test_files
from .coverage import Coverage
from .run import CaseResult, Failure, TestRun, run_tests

__all__ = ["CaseResult", "Coverage", "Failure", "TestCase", "TestFile", "TestRun", "load_test_files", "run_tests"]
