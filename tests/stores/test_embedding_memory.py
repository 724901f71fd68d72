"""The default model's tokenizer keeps a bounded word cache: queries with ever new words, from many
threads at once (as the pipeline threads embed them), do not make the process grow without end."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

HAS_WORDLLAMA = importlib.util.find_spec("wordllama") is not None

PROBE = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from context_assembly.stores.embedding import WORDLLAMA, get_embedder

embedder = get_embedder(WORDLLAMA)

def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def queries(start):
    for n in range(start, start + 500):
        embedder.embed([f"fix the login #{n} word{n * 7} w{n * 13}x"])

with ThreadPoolExecutor(8) as pool:
    list(pool.map(queries, range(0, 8000, 500)))  # the caches fill up to their bound
    before = rss_kib()
    list(pool.map(queries, range(8000, 32000, 500)))  # 72,000 more words never seen before
    after = rss_kib()
print(json.dumps({"before_kib": before, "after_kib": after}))
"""


@pytest.mark.skipif(not HAS_WORDLLAMA, reason="the wordllama package is not installed")
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmRSS from /proc")
def test_new_words_from_eight_threads_do_not_grow_the_process() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600, check=True)
    sizes = json.loads(done.stdout.strip().splitlines()[-1])
    grown_mib = (sizes["after_kib"] - sizes["before_kib"]) / 1024
    # unbounded, the caches kept every word: about 1.5 MiB per 1,000 queries here, 36 MiB in all
    assert grown_mib < 8, sizes
