"""Continuous batching for checkpoints: a line joins the running beam search at its next step and
leaves, answered, as soon as it ends (``nmt.search.Beams``).

A batch decoded to its end holds every caller until its longest sentence is done, and runs its last
steps on a few rows; here the answered callers send their next lines while the others decode, so the
search stays full. One decoding thread keeps one search per setting (model, beam, n-best, attention)
and steps them in turn; when nothing decodes it collects arriving lines for ``wait_ms`` first. A join
that fails is tried again request by request, so one bad request fails alone; a step that fails fails
the requests of that search only.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from nmt.serve_batch import QueueFull

log = logging.getLogger("nmt.serve")
JOIN_STEPS = 4  # steps new lines may wait for others to join with them


@dataclass
class _Job:
    key: Hashable  # (model, beam, n_best, attention)
    texts: list[str]
    future: asyncio.Future
    results: list = field(default_factory=list)
    left: int = 0  # lines not answered yet

    def __post_init__(self) -> None:
        self.results, self.left = [None] * len(self.texts), len(self.texts)


class Streamer:
    """``submit`` as ``serve_batch.Batcher``'s, for engines with ``search``/``add``/``step``/``answer`` (TorchEngine)."""

    def __init__(self, engines: Sequence, wait_ms: float = 5.0, max_queue: int = 2048):
        self.engines, self.wait, self.max_queue = engines, wait_ms / 1000.0, max_queue
        self.waiting_lines = 0  # submitted, not answered
        self.batches = self.steps = 0  # joins (each takes every line that arrived since the last) and search steps
        self._inbox: list[_Job] = []
        self._cond = threading.Condition()
        self._closing = False
        self._held = 0  # steps the waiting lines have been held back
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start the decoding thread; answers go back to the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="nmt-stream", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 10.0)

    async def submit(self, key: Hashable, texts: Sequence[str], timeout: float) -> list:
        """Results for ``texts``; raises QueueFull, asyncio.TimeoutError or the decode's error."""
        job = _Job(key, list(texts), asyncio.get_running_loop().create_future())
        with self._cond:
            if self.waiting_lines + len(job.texts) > self.max_queue:
                raise QueueFull(f"{self.waiting_lines} lines are waiting; the queue holds {self.max_queue}")
            self.waiting_lines += len(job.texts)
            self._inbox.append(job)
            self._cond.notify()
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except asyncio.TimeoutError:
            job.future.cancel()  # its lines still decode; their answers are dropped
            raise

    def _run(self) -> None:
        searches: dict[Hashable, object] = {}  # key -> the engine's live search
        while True:
            try:
                if self._turn(searches):
                    return
            except Exception as e:  # noqa: BLE001 - the thread must live on: its requests fail, later ones decode
                log.exception("the decoding thread failed")
                for search in searches.values():
                    self._fail(_jobs(search), e)
                searches.clear()

    def _turn(self, searches: dict) -> bool:
        """New lines join their searches, then every search takes one step; True once stopping."""
        with self._cond:
            while not self._inbox and not searches and not self._closing:
                self._cond.wait()
            if self._closing:
                return True
        if not searches:
            time.sleep(self.wait)  # let concurrent requests join the first step together
        live = sum(len(s) for s in searches.values())
        with self._cond:
            arrived = sum(len(job.texts) for job in self._inbox)
            # a join costs an encoder call and a copy of the search's state: newcomers wait (a few steps at most)
            # until they are a quarter of the live lines
            self._held = 0 if not arrived or 4 * arrived >= live or self._held >= JOIN_STEPS else self._held + 1
            jobs, self._inbox = (self._inbox, []) if self._held == 0 else ([], self._inbox)
        groups: dict[Hashable, list[_Job]] = {}
        for job in jobs:
            groups.setdefault(job.key, []).append(job)
        for key, group in groups.items():
            if key not in searches:
                searches[key] = self.engines[key[0]].search(*key[1:3])
            self._join(searches[key], group)
        for key, search in list(searches.items()):
            self._step(key, search)
            if not len(search):
                del searches[key]
        return False

    def _join(self, search, group: list[_Job]) -> None:
        """Encode the group's lines into ``search``; lines empty after normalization are answered at once."""
        engine = self.engines[group[0].key[0]]
        try:
            tags = [(job, i) for job in group for i in range(len(job.texts))]
            self._answer(engine, engine.add(search, [job.texts[i] for job, i in tags], tags))
            self.batches += 1
        except Exception as e:  # noqa: BLE001 - isolate the request at fault below
            if len(group) == 1:
                self._fail(group, e)
                return
            log.warning("%d requests failed to join a search (%s); joining them one by one", len(group), e)
            for job in group:
                self._join(search, [job])

    def _step(self, key: Hashable, search) -> None:
        engine = self.engines[key[0]]
        try:
            self._answer(engine, engine.step(search))
            self.steps += 1
        except Exception as e:  # noqa: BLE001 - the requests of this search fail, the server goes on
            log.exception("a search step failed")
            self._fail(_jobs(search), e)
            search.clear()

    def _answer(self, engine, done: list) -> None:
        """Hand each finished line (tag, n-best) its result; a job whose lines are all done goes back to its caller."""
        for (job, i), nbest in done:
            job.results[i] = engine.answer(job.texts[i], nbest, job.key[3])
            job.left -= 1
            if job.left == 0:
                self._settle(job, job.results)

    def _fail(self, jobs, error: Exception) -> None:
        for job in jobs:
            if job.left:
                job.left = 0
                self._settle(job, None, error)

    def _settle(self, job: _Job, results: list | None, error: Exception | None = None) -> None:
        with self._cond:
            self.waiting_lines -= len(job.texts)
        self._loop.call_soon_threadsafe(_set, job.future, results, error)


def _jobs(search) -> list[_Job]:
    """The requests of a search's live lines (tagged (job, line)), each once."""
    return list({id(job): job for job, _ in search.tags}.values())


def _set(future: asyncio.Future, results: list | None, error: Exception | None) -> None:
    if future.done():  # timed out or cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(results)
