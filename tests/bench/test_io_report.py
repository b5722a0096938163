"""bench/io_report.py: the rate, the ideal, the ratios and the pass/fail column of bench/io.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from io_report import (
    GIB_KIB,
    TARGETS,
    Call,
    Figures,
    checks,
    ideal_rate,
    pooled,
    rate_in,
    row,
    summarize,
    verdict,
)


def test_a_call_counts_for_the_part_of_its_time_inside_the_window():
    calls = [Call(0.0, 2.0, "ok"),      # half of it in [1, 5]
             Call(2.0, 4.0, "ok"),      # all of it
             Call(4.0, 6.0, "ok"),      # half
             Call(1.0, 3.0, "503")]     # not answered well: not counted
    assert rate_in(calls, 1.0, 5.0) == pytest.approx((0.5 + 1 + 0.5) / 4)


def test_a_closed_loop_counts_the_same_wherever_the_window_edges_fall_between_waves():
    # 10 callers, every call 2 s: 5 calls/s whatever the window, though answers come in waves.
    calls = [Call(2.0 * k, 2.0 * (k + 1), "ok") for k in range(10) for _ in range(10)]
    assert rate_in(calls, 1.0, 20.0) == pytest.approx(5.0)
    assert rate_in(calls, 3.9, 16.1) == pytest.approx(5.0)


def test_summarize_counts_errors_by_kind_and_takes_latencies_of_answered_calls():
    calls = [Call(0.0, 0.010 * (i + 1), "ok") for i in range(100)]
    calls += [Call(0.0, 30.0, "timeout"), Call(0.0, 0.5, "503"), Call(1.0, 40.0, "unanswered"),
              Call(0.0, 0.1, "handler error")]
    fig = summarize("x", calls, callers=4, delay_s=0.2, seconds=8)
    assert (fig.started, fig.ok, fig.answered) == (104, 100, 102)   # 503 and the handler error were answers
    assert fig.errors == {"timeout": 1, "503": 1, "unanswered": 1, "handler error": 1}
    assert fig.error_n == 4
    assert fig.p50 == pytest.approx(510.0) and fig.p99 == pytest.approx(1000.0) and fig.max == pytest.approx(1000.0)


def test_the_ideal_is_callers_over_the_delay_unless_the_machine_is_slower():
    assert ideal_rate(64, 0.2, 1000.0) == pytest.approx(320.0)
    assert ideal_rate(1000, 2.0, 180.0) == 180.0       # 500 would need more CPU than there is
    assert ideal_rate(32, 0.0, 180.0) == 180.0          # no delay: the CPU-bound rate itself


def _fig(name, rate, p99=10.0, max_ms=20.0, errors=None, started=100, answered=100, rss=0):
    fig = Figures(name, 64, 0.2, 10, started=started, answered=answered, ok=started, rate=rate, p50=p99 / 2,
                  p99=p99, max=max_ms, p99_all=p99, max_all=max_ms, errors=errors or {})
    fig.rss_peak_kib = rss
    return fig


def test_a_load_at_three_quarters_of_its_ideal_passes_and_below_fails():
    alone = _fig("alone", 400.0, p99=3.0, max_ms=30.0)
    quiet = _fig("quiet", 360.0, p99=6.0, max_ms=100.0)    # 0.90x the rate, 2x the p99
    assert verdict(checks(_fig("a", 240.0), 320.0, TARGETS["a"], quiet, alone)) == "pass"   # 0.75x
    assert verdict(checks(_fig("a", 200.0), 320.0, TARGETS["a"], quiet, alone)) == "FAIL: calls/s >= 0.75x ideal"


def test_the_quiet_tenants_targets_each_fail_on_their_own():
    alone = _fig("alone", 400.0, p99=3.0, max_ms=30.0)
    load = _fig("b", 190.0)
    ideal = 200.0
    assert verdict(checks(load, ideal, TARGETS["b"], _fig("q", 300.0, p99=9.5, max_ms=260.0), alone)) == (
        "FAIL: quiet p99 <= 3x; quiet max <= 250 ms; quiet calls/s >= 0.80x")
    assert verdict(checks(load, ideal, TARGETS["b"], _fig("q", 320.0, p99=9.0, max_ms=250.0), alone)) == "pass"


def test_errors_unanswered_calls_and_memory_fail_c():
    target = TARGETS["c"]
    ok = _fig("c", 180.0, rss=int(1.2 * GIB_KIB))
    assert [what for what, _ in checks(ok, 180.0, target)] == ["all answered", "0 errors", "RSS <= 1.5 GiB"]
    assert verdict(checks(ok, 180.0, target)) == "pass"
    assert verdict(checks(_fig("c", 180.0, errors={"timeout": 3}, answered=97, rss=GIB_KIB), 180.0, target)) == (
        "FAIL: all answered; 0 errors")
    assert verdict(checks(_fig("c", 180.0, rss=int(1.6 * GIB_KIB)), 180.0, target)) == "FAIL: RSS <= 1.5 GiB"
    # No memory sampled is no pass.
    assert verdict(checks(_fig("c", 180.0, rss=0), 180.0, target)) == "FAIL: RSS <= 1.5 GiB"


def test_a_load_with_no_target_has_no_verdict_and_a_missing_figure_never_passes():
    assert verdict(checks(_fig("one16", 8.0), 80.0, None)) == "-"
    assert verdict(checks(_fig("a", float("nan")), 320.0, TARGETS["a"])) == "FAIL: calls/s >= 0.75x ideal"


def test_the_row_sets_each_figure_beside_its_ratio():
    alone = _fig("alone", 400.0, p99=3.0, max_ms=30.0)
    load = _fig("a: one account x 64 callers", 8.2, errors={"timeout": 2, "503": 1})
    cells = row(load, 80.0, TARGETS["a"], _fig("quiet", 100.0, p99=12.0, max_ms=300.0), alone)
    assert cells[3:6] == ("8.2", "80.0", "0.10x")
    assert cells[8] == "3 (503 1, timeout 2)"
    assert cells[9:12] == ("100.0 (0.25x)", "12.00 (4.00x)", "300.0")
    assert cells[-1] == ("FAIL: calls/s >= 0.75x ideal; quiet p99 <= 3x; quiet max <= 250 ms; "
                         "quiet calls/s >= 0.80x")


def test_the_quiet_reference_pools_its_runs():
    before = [Call(0.0, 0.002, "ok")] * 50 + [Call(0.0, 0.004, "ok")] * 50
    after = [Call(0.0, 0.006, "ok")] * 100
    runs = [(summarize("q1", before, 4, 0, 1.0), before), (summarize("q2", after, 4, 0, 1.0), after)]
    runs[0][0].rate, runs[1][0].rate = 300.0, 200.0
    ref = pooled("both", runs)
    assert ref.rate == 250.0
    assert ref.p50 == pytest.approx(6.0) and ref.max == pytest.approx(6.0) and ref.ok == 200


def test_a_quiet_call_with_no_good_answer_counts_as_never_answered():
    alone_calls = [Call(i * 0.01, i * 0.01 + 0.003, "ok") for i in range(400)]
    alone = summarize("alone", alone_calls, 4, 0.0, 4.0)
    beside = [Call(i * 0.01, i * 0.01 + 0.004, "ok") for i in range(399)] + [Call(1.0, 31.0, "timeout")]
    quiet = summarize("quiet", beside, 4, 0.0, 4.0)
    assert quiet.max == pytest.approx(4.0) and quiet.max_all == float("inf")   # answered calls alone look fine
    assert quiet.p99_all == pytest.approx(4.0)   # 1 in 400 is under 1 %
    load = _fig("c", 180.0, rss=GIB_KIB)
    cells = row(load, 180.0, TARGETS["c"], quiet, alone)
    assert cells[10:12] == ("4.00 (1.33x)", "none (1 failed)")
    assert verdict(checks(load, 180.0, TARGETS["c"], quiet, alone)) == "FAIL: quiet max <= 250 ms"
