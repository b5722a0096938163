"""bench/load_report.py's alternating measure: which good calls count on which side, and at what rate."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_report import SETTLE_S, Call, alternation_on, summarize_alternation


def good(done: float, ms: float = 10.0) -> Call:
    return Call("good", 0, False, done, ms, 200)


def test_blocks_go_on_off_off_on_so_a_linear_drift_weighs_on_both_sides():
    on = alternation_on(5.0)
    assert [on(i * 5.0 + 2.5) for i in range(8)] == [True, False, False, True, True, False, False, True]


def test_good_calls_count_by_their_block_and_each_blocks_settling_second_is_left_out():
    block = 5.0
    calls = [
        good(0.5, ms=999),     # block 0 (on), settling: left out
        good(2.0, ms=20), good(3.0, ms=20),   # block 0 (on)
        good(6.0, ms=10),      # block 1 (off)
        good(12.0, ms=10),     # block 2 (off)
        good(17.0, ms=30),     # block 3 (on)
        good(21.0, ms=999),    # past the 4 blocks: left out
        Call("runaway", 1, False, 2.5, 5.0, 200),   # a bad call: counted apart
        Call("good", 2, False, 7.0, 5.0, 500),      # a failed good call: not counted
    ]
    alt = summarize_alternation("runaway4", calls, block, blocks=4)
    counted = 2 * (block - SETTLE_S)   # two blocks a side, less their settling seconds
    assert alt.on_rate == 3 / counted and alt.off_rate == 2 / counted
    assert alt.ratio == 1.5
    assert alt.on_p99 == 30 and alt.off_p99 == 10   # the settling call's 999 ms is not in it
    assert alt.bad_n == 1
