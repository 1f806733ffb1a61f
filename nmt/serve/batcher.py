"""Micro-batching for the server: requests that arrive within a few milliseconds decode as one batch.

Callers ``await batcher.submit(key, texts, timeout)``; once a decoding thread is free, a task
collects the waiting requests for ``wait_ms`` more, groups them by ``key`` (requests with other
search settings cannot share a beam search), decodes each group in one call on one of ``workers``
decoding threads and hands every caller its own lines back. While one thread decodes, the requests
that come in meanwhile go to the next free one. A group whose decode fails is decoded again request
by request, so one bad request only fails itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Decode = Callable[[Hashable, Sequence[str]], list]  # (key, lines) -> one result per line


class QueueFull(Exception):
    """More lines are waiting than the queue allows."""


@dataclass
class _Job:
    key: Hashable
    texts: list[str]
    future: asyncio.Future
    queued: float = field(default_factory=time.monotonic)


class Batcher:
    """Collects jobs for ``wait_ms`` once a decoding thread is free, then decodes at most ``max_lines`` lines per
    call, ``workers`` calls at a time (``init`` runs first in each decoding thread)."""

    def __init__(self, decode: Decode, wait_ms: float = 5.0, max_lines: int = 256, max_queue: int = 2048,
                 workers: int = 1, init: Callable[[], None] | None = None):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.decode, self.wait = decode, wait_ms / 1000.0
        self.max_lines, self.max_queue, self.workers = max_lines, max_queue, workers
        self.pending: list[_Job] = []
        self.waiting_lines = 0
        self.batches = 0  # decode calls made
        self.busy_s = 0.0  # seconds spent in decode calls
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._free: asyncio.Semaphore | None = None  # decoding threads not busy
        self._decoding: set[asyncio.Task] = set()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nmt-decode", initializer=init)

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._wake, self._free = asyncio.Event(), asyncio.Semaphore(self.workers)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._decoding) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def submit(self, key: Hashable, texts: Sequence[str], timeout: float) -> list:
        """Results for ``texts``; raises QueueFull, asyncio.TimeoutError or the decode's error."""
        if self.waiting_lines + len(texts) > self.max_queue:
            raise QueueFull(f"{self.waiting_lines} lines are waiting; the queue holds {self.max_queue}")
        job = _Job(key, list(texts), asyncio.get_running_loop().create_future())
        self.pending.append(job)
        self.waiting_lines += len(job.texts)
        self._wake.set()
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except asyncio.TimeoutError:
            job.future.cancel()  # still waiting: it is skipped; being decoded: its result is dropped
            raise

    def _take(self) -> list[_Job]:
        """Waiting jobs, oldest first, up to ``max_lines`` lines (at least one job)."""
        taken, lines = [], 0
        while self.pending and (not taken or lines + len(self.pending[0].texts) <= self.max_lines):
            job = self.pending.pop(0)
            self.waiting_lines -= len(job.texts)
            if not job.future.done():  # timed out or cancelled while waiting
                taken.append(job)
                lines += len(job.texts)
        return taken

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
            await self._free.acquire()  # requests keep joining while every thread is busy
            # and for wait_ms once one is free: concurrent requests join, and so do the next lines of
            # the callers whose batch just ended (else they would wait a whole batch, and with one
            # thread the callers split into two groups decoding half-size batches in turn)
            await asyncio.sleep(self.wait)
            task = loop.create_task(self._decode_jobs(loop, self._take()))
            self._decoding.add(task)
            task.add_done_callback(self._decoding.discard)

    async def _decode_jobs(self, loop: asyncio.AbstractEventLoop, jobs: list[_Job]) -> None:
        try:
            groups: dict[Hashable, list[_Job]] = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for key, group in groups.items():
                await self._decode_group(loop, key, group)
        finally:
            self._free.release()

    def _timed(self, key: Hashable, lines: list[str]) -> list:
        start = time.perf_counter()
        try:
            return self.decode(key, lines)
        finally:
            self.busy_s += time.perf_counter() - start

    async def _decode_group(self, loop: asyncio.AbstractEventLoop, key: Hashable, group: list[_Job]) -> None:
        lines = [t for job in group for t in job.texts]
        self.batches += 1
        try:
            results = await loop.run_in_executor(self._pool, self._timed, key, lines)
        except Exception as e:  # noqa: BLE001 - isolate the request at fault below
            if len(group) == 1:
                _settle(group[0], error=e)
                return
            log.warning("a batch of %d requests failed (%s); decoding them one by one", len(group), e)
            for job in group:
                await self._decode_group(loop, key, [job])
            return
        start = 0
        for job in group:
            _settle(job, results[start : start + len(job.texts)])
            start += len(job.texts)


def _settle(job: _Job, results: list | None = None, error: Exception | None = None) -> None:
    if job.future.done():
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(results)
