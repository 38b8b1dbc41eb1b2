"""Every log line reaches mpirun's output whole. Open MPI forwards each rank's output in chunks that
can end inside a line (reads of up to 4096 bytes), and chunks of ranks that write at the same time
interleave; so per-rank lines written at the same point (memory reports, parameter counts) are
gathered and written by one rank, in rank order. Eight 4-rank runs (TP 2 x PP 2, an iteration
line each iteration), stdout and stderr merged: every line starts with the logger's timestamp or
continues the timer report, and every iteration line is whole."""
from __future__ import annotations

import re
import subprocess

from data_helpers import MPIRUN
from test_checkpoint import PRETRAIN, tiny

LINE = re.compile(r"^(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[rank \d/4\] \[\w+\] |    \S)")
ITERATION = re.compile(r"\] \[info\]  iteration +(\d+)/ +6 \| consumed samples: .* \| number of nan iterations: +0 \|$")


def test_every_line_of_a_four_rank_job_is_whole():
    for attempt in range(8):
        proc = subprocess.run(MPIRUN + ["-np", "4", PRETRAIN, *tiny(6, "--tensor-model-parallel-size", "2",
                                                                       "--pipeline-model-parallel-size", "2")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-3000:]
        lines = proc.stdout.splitlines()
        broken = [line for line in lines if not LINE.match(line)]
        assert not broken, f"run {attempt}: {broken[:3]}"
        iterations = [int(m.group(1)) for line in lines if (m := ITERATION.search(line))]
        assert iterations == list(range(1, 7)), f"run {attempt}: iteration lines {iterations}"
        # The per-rank reports, written by one rank each time.
        assert len({line.split("] ")[1] for line in lines if "memory (MB) after optimizer setup" in line}) == 1
        assert sum("memory (MB) after optimizer setup" in line for line in lines) == 4
