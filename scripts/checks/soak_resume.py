"""A soak check anyone can run: SIGKILL training at N random moments, resume each time, compare with an
uninterrupted run (tiny 2-layer CPU model on the embedded HSK corpus, a few minutes on 2 cores).

    python scripts/checks/soak_resume.py [--kills 10] [--ddp-kills 5] [--only step,time,ddp] [--seed 1]
                                  [--minutes 1.0] [--recipe zh_en_local_p] [--out DIR] [--json FILE]

step: a step budget; the final last.pt weights equal the uninterrupted run's bit for bit, at max_steps.
time: a time budget with a cosine schedule; the final clock (counters.train_seconds) ends within two
      updates of the budget, and the learning rate never rises after the warm-up, resumes included.
ddp:  torchrun, 2 CPU processes (gloo), a step budget; "ranks agree" is logged and the final weights
      equal the uninterrupted 2-process run's. A kill stops torchrun and its workers at one moment.
Each kill prints the step last logged, the checkpoint's step and the steps lost; each scenario a verdict.
Runs go to OUT/<scenario>/{full,killed}, every launch's output to OUT/<scenario>/logs. Exit status 1 if
a check fails; --json writes the figures with the date, commit, command line and CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from nmt import checkpoint  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

SAVE_EVERY = 5  # a checkpoint every 5 updates: a kill loses at most that many
TINY = [  # tests/test_resume.py's tiny run, with 2 layers on each side (dropout between layers)
    "data=hsk", "model.emb_size=32", "model.hidden_size=32", "model.encoder_layers=2", "model.decoder_layers=2",
    "tokenizer.src_vocab_size=2000", "tokenizer.tgt_vocab_size=500", "data.dev_size=100", "data.test_size=100",
    "trainer.threads=1", "trainer.batch_tokens=400", "trainer.valid_max_sentences=20", "model.dropout=0.3",
]
COMMON = ["trainer.device=cpu", "trainer.test_beam=0", "trainer.attention_images=0", "trainer.log_every=1",
          f"trainer.save_every={SAVE_EVERY}"]
STEP = re.compile(r"\] - step (\d+) \|")
WARMUP = 20  # the time scenario's warm-up steps


class Launch:
    """One training process (or torchrun and its workers) in a session of its own; a thread reads its output,
    copies it to ``log`` and stamps each logged step on arrival."""

    def __init__(self, cmd: list[str], env: dict, log: Path):
        self.t0, self.t_end, self.log, self.lines = time.monotonic(), 0.0, log, []
        self.steps: list[tuple[float, int]] = []  # (arrival time, step) of each "step N |" line
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with open(self.log, "w") as f:
            for line in self.proc.stdout:
                if m := STEP.search(line):
                    self.steps.append((time.monotonic(), int(m.group(1))))
                self.lines.append(line)
                f.write(line)

    def kill(self) -> None:
        """SIGKILL the process group of the launch and those of its descendants, all frozen first so that they stop
        at one moment: torchrun starts each worker in a session of its own, so its group alone leaves them training."""
        pids = [self.proc.pid, *descendants(self.proc.pid)]
        for sig, pid in [(sig, pid) for sig in (signal.SIGSTOP, signal.SIGKILL) for pid in pids]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), sig)
        self.finish(check=False)

    def finish(self, check: bool = True) -> None:
        """Wait for the end (and the last output); with ``check``, a non-zero exit status ends the soak."""
        rc = self.proc.wait(timeout=900)
        self.reader.join()
        self.t_end = time.monotonic()
        if check and rc:
            raise SystemExit(f"{self.log}: exit {rc}\n{''.join(self.lines)[-3000:]}")


class Soak:
    """Launches the runs of one scenario under ``out`` (logs in ``out/logs``) and kills them."""

    def __init__(self, out: Path, env: dict, ddp: bool, base: list[str]):
        self.out, self.env, self.ddp, self.n, self.base = out, env, ddp, 0, base
        (out / "logs").mkdir(parents=True, exist_ok=True)

    def launch(self, run: Path, overrides: list[str]) -> Launch:
        self.n += 1
        args = ["-m", "nmt.train", *self.base, *overrides, f"hydra.run.dir={run}"]
        if self.ddp:
            with socket.socket() as s:  # a fresh free port: a killed group's port may linger
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            args = ["-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port", str(port), *args]
        return Launch([sys.executable, *args], self.env, self.out / "logs" / f"{self.n:02d}_{run.name}.log")

    def killed(self, run: Path, overrides: list[str], kills: int, ready: Callable[[Launch, int, dict], bool],
               rng: random.Random) -> tuple[list[dict], list[Launch], list[dict]]:
        """Kill a launch ``kills`` times, 0-0.3 s after ``ready(launch, kill index, counters at launch)``, resume
        each time, then let it finish. Returns the kills, the launches and the counters each started from."""
        rows, launches, starts = [], [], []
        for i in range(kills + 1):
            starts.append(counters(run))
            p = self.launch(run, [*overrides, "trainer.resume=auto"])
            launches.append(p)
            while i < kills and p.proc.poll() is None and not (p.steps and ready(p, i, starts[-1])):
                time.sleep(0.005)
            if i == kills or p.proc.poll() is not None:
                break  # the last launch, or one that finished before its kill
            time.sleep(rng.uniform(0, 0.3))  # anywhere in a step, a validation or a checkpoint write
            p.kill()
            logged, saved = p.steps[-1][1], counters(run)
            rows.append({"kill": i + 1, "logged_step": logged, "checkpoint_step": saved["step"],
                         "lost_steps": logged - saved["step"], "clock": round(saved["train_seconds"], 3)})
            print(f"  kill {i + 1:2d}: logged step {logged:5d} | checkpoint step {saved['step']:5d} | "
                  f"lost {logged - saved['step']} | clock {saved['train_seconds']:.2f}s", flush=True)
        launches[-1].finish()
        return rows, launches, starts


def descendants(pid: int) -> list[int]:
    """The process ids below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # the field after "(name)": the parent's id
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
    found = list(children.get(pid, []))
    for child in found:  # grows while it runs: breadth first
        found += children.get(child, [])
    return found


def counters(run: Path) -> dict:
    """counters of a run's last.pt (step 0 before the first checkpoint)."""
    path = run / "checkpoints" / "last.pt"
    return checkpoint.load(path)["counters"] if path.exists() else {"step": 0, "train_seconds": 0.0}


def same_weights(a: Path, b: Path) -> tuple[bool, list[str]]:
    """True if every tensor of the two runs' last.pt "model" is equal; the names that differ."""
    wa, wb = (checkpoint.load(r / "checkpoints" / "last.pt")["model"] for r in (a, b))
    differ = sorted(set(wa) ^ set(wb)) + [k for k in wa if k in wb and not torch.equal(wa[k], wb[k])]
    return not differ, differ


def lr_curve(run: Path, resumed_at: list[int]) -> dict[int, float]:
    """train/lr by step from the run's events files, one per launch in launch order: a later launch wins on the
    steps it re-logged and also drops the unflushed leftovers of launches it superseded (steps past its resume)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted((run / "tensorboard").glob("events.*"), key=lambda p: p.stat().st_mtime_ns)
    curve: dict[int, float] = {}
    for f, start in zip(files, resumed_at if len(resumed_at) == len(files) else [10**12] * len(files)):
        acc = EventAccumulator(str(f))
        acc.Reload()
        curve = {s: v for s, v in curve.items() if s <= start}
        if "train/lr" in acc.Tags()["scalars"]:
            curve.update({e.step: e.value for e in acc.Scalars("train/lr")})
    return curve


def verdict(name: str, checks: dict[str, bool], figures: dict) -> dict:
    ok = all(checks.values())
    print(f"{name}: {'PASS' if ok else 'FAIL'} " + " ".join(f"[{k}: {'ok' if v else 'FAILED'}]" for k, v in checks.items()))
    return {"pass": ok, "checks": checks, **figures}


def step_scenario(soak: Soak, steps: int, kills: int, rng: random.Random, name: str) -> dict:
    """Uninterrupted vs killed-and-resumed, both to ``steps``: the same final weights."""
    overrides = [f"trainer.max_steps={steps}", "trainer.max_minutes=0", "trainer.valid_every=50"]
    full, run = soak.out / "full", soak.out / "killed"
    (first := soak.launch(full, overrides)).finish()
    targets = sorted(rng.sample(range(1, int(steps * 0.85)), kills))  # logged steps to kill at (or after)
    rows, launches, starts = soak.killed(run, overrides, kills, lambda p, i, c: p.steps[-1][1] >= targets[i], rng)
    (same, differ), final = same_weights(full, run), counters(run)["step"]
    checks = {"kills delivered": len(rows) == kills, f"final step {steps}": final == steps,
              "weights bit-identical": same, "lost <= save_every": all(r["lost_steps"] <= SAVE_EVERY for r in rows)}
    if soak.ddp:
        past_a_save = [p for p, c in zip((first, *launches), ({"step": 0}, *starts))  # launches that saved a checkpoint
                       if p.steps and p.steps[-1][1] > (c["step"] // SAVE_EVERY + 1) * SAVE_EVERY]
        checks["ranks agree logged"] = all(any("ranks agree" in x for x in p.lines) for p in past_a_save)
    return verdict(name, checks, {"steps": steps, "final_step": final, "kills": rows, "tensors_differing": differ,
                                  "launches": len(launches)})


def time_scenario(soak: Soak, minutes: float, kills: int, rng: random.Random) -> dict:
    """A cosine schedule over a time budget, killed and resumed: the clock ends at the budget, the lr never rises."""
    budget = minutes * 60
    overrides = ["trainer.max_steps=0", f"trainer.max_minutes={minutes}", "trainer.schedule=cosine",
                 f"trainer.warmup_steps={WARMUP}", "trainer.valid_every=1000"]
    run = soak.out / "killed"
    targets = sorted(rng.uniform(0.02, 0.9) * budget for _ in range(kills))  # clock readings to kill at

    def ready(p: Launch, i: int, at_launch: dict) -> bool:  # the clock runs from about the first logged step on
        return time.monotonic() - p.steps[0][0] >= targets[i] - at_launch["train_seconds"]

    rows, launches, starts = soak.killed(run, overrides, kills, ready, rng)
    clock, n = counters(run)["train_seconds"], counters(run)["step"]
    update = clock / max(n, 1)  # a typical update's time, validations and checkpoint writes included
    loop = json.loads((run / "metrics.json").read_text())["train_seconds"]  # the clock when the loop stopped
    startups = [p.steps[0][0] - p.t0 for p in launches if p.steps]  # launch to the first logged step
    wall, curve = sum(p.t_end - p.t0 for p in launches), lr_curve(run, [c["step"] for c in starts])
    after = sorted(s for s in curve if s >= WARMUP)
    rise, at = max((((curve[b] - curve[a]) / curve[a], b) for a, b in zip(after, after[1:]) if curve[a] > 0),
                   default=(0.0, None))
    print(f"  last.pt clock {clock:.3f}s for a {budget:g}s budget: +{clock - budget:.3f}s = the loop's stop "
          f"+{loop - budget:.3f}s, then +{clock - loop:.3f}s (final validation) | {n} updates of {1000 * update:.1f} ms")
    print(f"  wall {wall:.1f}s in {len(launches)} launches vs budget + start-ups {budget + sum(startups):.1f}s "
          f"(start-up median {statistics.median(startups):.2f}s): +{wall - budget - sum(startups):.1f}s")
    print(f"  lr after the warm-up: {len(after)} steps, {curve[after[0]]:.4g} -> {curve[after[-1]]:.3g}, largest "
          f"relative change step to step {rise:+.3g} (step {at})")
    checks = {"kills delivered": len(rows) == kills, "lost <= save_every": all(r["lost_steps"] <= SAVE_EVERY for r in rows),
              "loop stopped within 2 updates of the budget": budget <= loop <= budget + 2 * update,
              "last.pt clock within 2 updates of the budget": budget <= clock <= budget + 2 * update,
              "lr non-increasing after warm-up": rise <= 1e-9}
    return verdict("time", checks, {
        "budget_s": budget, "train_seconds": clock, "loop_stop_seconds": loop, "steps": n, "update_s": update,
        "wall_s": wall, "startups_s": startups, "launches": len(launches), "lr_steps_checked": len(after),
        "lr_largest_rise": rise, "lr_largest_rise_step": at, "kills": rows})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=10, help="kills in the step and time scenarios")
    p.add_argument("--ddp-kills", type=int, default=5, help="kills in the 2-process scenario")
    p.add_argument("--only", default="step,time,ddp", help="scenarios to run, comma-separated")
    p.add_argument("--seed", type=int, default=1, help="seeds the kill moments")
    p.add_argument("--minutes", type=float, default=1.0, help="the time scenario's budget")
    p.add_argument("--steps", type=int, default=300, help="the step scenario's max_steps")
    p.add_argument("--ddp-steps", type=int, default=200, help="the 2-process scenario's max_steps")
    p.add_argument("--recipe", help="train this experiment (e.g. zh_en_local_p, its corpus and model) instead of the "
                   "tiny model; its schedule and budget give way to the scenario's")
    p.add_argument("--out", type=Path, help="run folders go here (default: a new temporary folder)")
    p.add_argument("--json", type=Path, help="write the record here")
    args = p.parse_args()
    names = args.only.split(",")
    if unknown := set(names) - {"step", "time", "ddp"}:
        p.error(f"--only: unknown scenario(s) {sorted(unknown)} (step, time, ddp)")
    out = args.out or Path(tempfile.mkdtemp(prefix="soak_resume_"))
    env = dict(os.environ, NMT_CACHE=str(out / "cache"), CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    env.pop("HYDRA_FULL_ERROR", None)
    rng, t0, results = random.Random(args.seed), time.monotonic(), {}
    print(f"soak_resume: run folders under {out}", flush=True)
    for name in names:
        if (out / name).exists():
            raise SystemExit(f"{out / name} exists: choose another --out")
        print(f"== {name}", flush=True)
        base = [f"+experiment={args.recipe}", *COMMON] if args.recipe else [*TINY, *COMMON]
        soak = Soak(out / name, env, ddp=name == "ddp", base=base)
        if name == "time":
            results[name] = time_scenario(soak, args.minutes, args.kills, rng)
        else:
            steps, kills = (args.ddp_steps, args.ddp_kills) if name == "ddp" else (args.steps, args.kills)
            results[name] = step_scenario(soak, steps, kills, rng, name)
    ok, wall = all(r["pass"] for r in results.values()), time.monotonic() - t0
    print(f"soak_resume: {'PASS' if ok else 'FAIL'} in {wall:.0f}s", flush=True)
    save(args.json, record({"out": str(out), "wall_s": wall, "pass": ok, "scenarios": results}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
