"""The README's "own Transformer in ten lines" (examples/own_transformer.py) runs as written:
structure found without roles, the recipe's attention scale set by apply (no warning), the
coordinate check's depth exponents, and the Adam transfer rule."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "own_transformer.py"


def test_the_own_transformer_example_runs_and_measures() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "error::UserWarning"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--tiny"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    # 2 pre-LN blocks: 4 residual branches, L = m + K = 2 + 4 (laws Sec. 3.4)
    assert "width 64, 4 residual branches in 2 blocks, effective depth 6" in out
    # 1/d_head, set by apply on the attribute that holds it
    assert "attention: blocks.0 (d_head 32, scale 0.03125; attention_scale = 0.03125)" in out
    # CompleteP: each branch's output ~ L^-1 (multiplier T/L); the stream stays O(1)
    slope = float(re.search(r"branch_out\s+act_vs_depth\s+([+-]\d\.\d\d)", out).group(1))
    assert -1.15 <= slope <= -0.85, out
    stream = float(re.search(r"stream\s+act_vs_depth\s+([+-]\d\.\d\d)", out).group(1))
    assert abs(stream) <= 0.15, out
    # Adam under CompleteP: depth-free, x sqrt(64/256) in width
    assert "Transfer(lr=0.0015," in out
