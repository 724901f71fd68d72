"""The stdio transport's own paths: stdin read by the event loop when it is a pipe or a socket (a
thread reads regular files and terminals), stdout written whole-frame by any thread, and a
request answered by its worker thread exactly once, whatever else arrives meanwhile."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.lsp.framing import (
    PIPE_SIZE,
    FileDescriptorSource,
    FrameReader,
    PipeSource,
    input_source,
    widen_pipe,
)
from context_assembly.lsp.transports import PipeWriter

from .support import RawServer, clone, frame


def framed(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def feed(fd: int, chunks: list[bytes]) -> threading.Thread:
    """Write `chunks` to `fd` from a thread (a pipe holds 64 KiB: the reader must drain it), then close it."""

    def write() -> None:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


async def bodies(source: Any, **options: Any) -> list[bytes]:
    reader = FrameReader(source, **options)
    out = []
    while (body := await reader.next_body()) is not None:
        out.append(body)
    return out


def read_all(chunks: list[bytes], **options: Any) -> list[bytes]:
    """Every body a FrameReader over a PipeSource reads from `chunks` written into a real pipe."""
    r, w = os.pipe()
    writer = feed(w, chunks)
    source = PipeSource(r)
    try:
        return asyncio.run(bodies(source, **options))
    finally:
        source.close()
        writer.join(5)
        os.close(r)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({p % (len(data) + 1) for p in points})
    return [data[a:b] for a, b in zip([0, *edges], [*edges, len(data)], strict=True) if b > a]


messages = st.lists(st.binary(min_size=0, max_size=3000).map(lambda b: json.dumps({"x": b.hex()}).encode()),
                    min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages, st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=30))
def test_the_pipe_reader_reads_every_body_however_the_bytes_are_split(sent: list[bytes], points: list[int]) -> None:
    data = b"".join(framed(body) for body in sent)
    assert read_all(cut(data, points)) == sent


def test_the_pipe_reader_reads_a_body_larger_than_the_pipe_and_its_read_size() -> None:
    body = json.dumps({"x": "y" * 300_000}).encode()
    assert read_all([framed(body), framed(b"{}")]) == [body, b"{}"]


def test_at_end_of_input_inside_a_body_the_pipe_reader_ends() -> None:
    assert read_all([framed(b'{"a":1}'), b"Content-Length: 50\r\n\r\n{\"b\":"]) == [b'{"a":1}']
    assert read_all([]) == []


def test_an_oversized_body_is_skipped_and_reported_and_the_next_one_read() -> None:
    refused: list[tuple[bytes, int, int]] = []
    big = b'{"id":7,"x":"' + b"z" * 200_000 + b'"}'
    got = read_all([framed(big), framed(b'{"id":8}')], max_body=1000,
                   on_oversized=lambda head, size, limit: refused.append((head, size, limit)))
    assert got == [b'{"id":8}']
    assert [(size, limit) for _, size, limit in refused] == [(len(big), 1000)]
    assert refused[0][0].startswith(b'{"id":7')


def test_the_pipe_reader_leaves_the_descriptor_blocking_again() -> None:
    r, w = os.pipe()
    os.close(w)
    source = PipeSource(r)
    try:
        assert asyncio.run(bodies(source)) == []
        source.close()
        assert os.get_blocking(r)
    finally:
        os.close(r)


@pytest.fixture
def fds() -> Iterator[list[int]]:
    opened: list[int] = []
    yield opened
    for fd in opened:
        os.close(fd)


def test_pipes_and_sockets_are_read_by_the_loop_files_and_shared_descriptors_by_a_thread(fds: list[int]) -> None:
    r, w = os.pipe()
    r2, w2 = os.pipe()
    a, b = socket.socketpair()
    fds += [r, w, r2, w2, a.detach(), b.detach()]
    handle, path = tempfile.mkstemp()
    fds.append(handle)
    try:
        assert isinstance(input_source(r, w2), PipeSource)  # how a client spawns the server
        assert isinstance(input_source(fds[4], fds[5]), PipeSource)
        assert isinstance(input_source(fds[4], fds[4]), FileDescriptorSource)  # one socket both ways
        assert isinstance(input_source(r, w), FileDescriptorSource)  # one pipe both ways
        assert isinstance(input_source(handle), FileDescriptorSource)  # a regular file
        assert isinstance(input_source(1 << 20), FileDescriptorSource)  # not open: the thread reports EOF
    finally:
        os.unlink(path)


def test_a_regular_file_as_stdin_is_read_by_the_thread_reader(tmp_path: Path) -> None:
    data = tmp_path / "input"
    data.write_bytes(framed(b'{"a":1}') + framed(b'{"b":2}'))
    with data.open("rb") as stream:
        source = input_source(stream.fileno())
        assert isinstance(source, FileDescriptorSource)
        assert asyncio.run(bodies(source)) == [b'{"a":1}', b'{"b":2}']


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=1, max_value=200_000), min_size=2, max_size=6), st.integers(2, 6))
def test_a_writer_shared_by_threads_never_interleaves_two_messages(sizes: list[int], threads: int) -> None:
    r, w = os.pipe()
    writer = PipeWriter(os.fdopen(w, "wb"))
    expected: list[bytes] = []
    plans = []
    for t in range(threads):
        plan = [json.dumps({"t": t, "n": n, "pad": chr(97 + t) * size}).encode() for n, size in enumerate(sizes)]
        plans.append(plan)
        expected += plan

    def write(plan: list[bytes]) -> None:
        for body in plan:
            writer.write(framed(body))

    workers = [threading.Thread(target=write, args=(plan,)) for plan in plans]
    received: list[bytes] = []
    collector = threading.Thread(target=lambda: received.extend(
        asyncio.run(bodies(FileDescriptorSource(r), max_body=1 << 30))))
    collector.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    writer.close()
    collector.join(30)
    os.close(r)
    assert sorted(received) == sorted(expected)  # every frame whole: none cut into by another
    for plan in plans:  # and each thread's in its own order
        assert [b for b in received if b in set(plan)] == plan


def test_a_closed_writer_refuses_instead_of_writing(tmp_path: Path) -> None:
    writer = PipeWriter((tmp_path / "out").open("wb"))
    writer.write(b"a")
    writer.close()
    with pytest.raises(BrokenPipeError):
        writer.write(b"b")


# -- end to end: the worker answers, once ---------------------------------------------------------


@pytest.fixture(scope="module")
def raw(seeded_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(clone(seeded_template, tmp_path_factory.mktemp("stdio") / "ws"))
    server.initialize()
    yield server
    assert server.close() == 0


EVALUATE = {"jsonrpc": "2.0", "method": "contextAssembly/evaluateRules"}


def test_a_request_cancelled_as_its_worker_answers_is_answered_exactly_once(raw: RawServer) -> None:
    # "matched": a settled "none" evaluation is answered by the event loop, before any cancel is read
    params = {"scope_variables": {}, "additional_variables": {}, "explain": "matched"}
    for n in range(30):
        msg_id = f"race-{n}"
        raw.send(frame({**EVALUATE, "id": msg_id, "params": params})
                 + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": msg_id}})
                 + frame({**EVALUATE, "id": f"after-{n}", "params": params}))
        raw.answer(f"after-{n}")  # answered after the cancelled one's worker finished or was stopped
        answers = [raw.answer(msg_id)]
        raw._pump(0.05)
        answers += [m for m in raw.received if m.get("id") == msg_id]  # a second answer would be here
        raw.received.clear()
        assert len(answers) == 1, answers
        answer = answers[0]
        assert "result" in answer or answer["error"]["code"] == -32800


@pytest.mark.parametrize("explain", ["none", "matched"])  # answered by the event loop once settled / by workers
def test_errors_and_results_of_many_requests_in_flight_each_get_one_answer(raw: RawServer, explain: str) -> None:
    good = {"scope_variables": {}, "additional_variables": {}, "explain": explain}
    batch = b""
    for n in range(40):
        params = good if n % 3 else {"explain": explain, "scope_variables": "not an object"}
        batch += frame({**EVALUATE, "id": n, "params": params})
    raw.send(batch)
    answers = {}
    for n in range(40):
        answers[n] = raw.answer(n)
    raw._pump(0.2)
    assert not [m for m in raw.received if m.get("id") in answers]  # nothing answered twice
    for n, answer in answers.items():
        if n % 3:
            assert "matched_memories" in answer["result"]
        else:
            assert answer["error"]["code"] == -32602


def test_the_output_pipe_is_widened_so_a_large_answer_goes_out_in_one_write(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("pipe sizes are a Linux feature")
    r, w = os.pipe()
    try:
        widen_pipe(w)
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) >= min(PIPE_SIZE, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
    finally:
        os.close(r)
        os.close(w)
    with (tmp_path / "file").open("wb") as regular:
        widen_pipe(regular.fileno())  # not a pipe: left alone, no error


def test_an_oversized_body_is_skipped_even_without_a_handler() -> None:
    """A reader given no `on_oversized` read the refused body as header lines (a problem reported per
    64 KiB of it, and a JSON body inside it could be taken for a message)."""
    problems: list[str] = []
    big = b'{"pretty": true}\r\n\r\n' + framed(b'{"smuggled": true}') + b" " * 5000  # lines inside the body
    got = read_all([framed(b'{"a":1}'), framed(big), framed(b'{"b":2}')], max_body=1000, on_problem=problems.append)
    assert got == [b'{"a":1}', b'{"b":2}']
    assert len(problems) == 1 and "refused a body" in problems[0]
