"""``translate --input`` and ``evaluate`` draw a progress bar when stderr is a terminal, none when piped."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios


def _stderr_on_a_terminal(args: list[str], env: dict, timeout: float = 180) -> tuple[int, str, str]:
    """Run ``python -m ARGS`` with stderr on a pseudo-terminal; exit code, stdout, terminal text."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))  # tqdm draws nothing at 0 × 0
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=slave, env=env, text=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=timeout)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", errors="replace")


def test_progress_bar_on_a_terminal_only(trained_run, run_cli, cli_env, tmp_path, explain):
    src = tmp_path / "in.zh"
    src.write_text("老师，您好！\n\n图书馆在学校里边。\n", encoding="utf-8")
    code, out, term = _stderr_on_a_terminal(["nmt.translate", str(trained_run), "--input", str(src), "--beam", "2"], cli_env)
    assert code == 0 and len(out.splitlines()) == 3, term[-2000:]
    assert "translating" in term and "/3 " in term
    code, out, term = _stderr_on_a_terminal(["nmt.evaluate", str(trained_run), "--split", "dev", "--beam", "1"], cli_env)
    assert code == 0 and "dev:" in term and "/100 " in term, term[-2000:]
    piped = run_cli("nmt.translate", trained_run, "--input", src, "--beam", "2")
    assert piped.returncode == 0 and "translating" not in piped.stderr, explain(piped)
