"""How many of an exercise's stubs are still stubs: the ``raise NotImplementedError("exercise N: ...")`` lines."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
STUB = re.compile(r'raise NotImplementedError\("exercise \d+:')
ORIGINAL_COUNT = {"ex01_elementwise": 5, "ex02_reductions_and_shapes": 7, "ex03_backward": 2, "ex04_softmax": 5,
                  "ex05_layers": 6, "ex06_rnn": 2, "ex07_adamw": 2, "ex08_kv_cache": 3, "ex09_forward_mode": 1,
                  "ex10_checkpoint": 3,
                  "ex11_ring_all_reduce": 1,
                  "ex12_loss_scaler": 4,
                  "ex13_flash_attention": 2,
                  "ex14_autograd_function": 3}


def count_stubs(module: str, solutions: bool = False) -> tuple[int, int]:
    """(stubs left in the file, stubs it started with)."""
    path = HERE / ("solutions" if solutions else "") / f"{module}.py"
    return len(STUB.findall(path.read_text(encoding="utf-8"))), ORIGINAL_COUNT[module]
