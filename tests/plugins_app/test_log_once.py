"""OncePerInterval (services/log_once.py): a repeating failure is one line per interval per kind, with how
many it stands for; a call can stand for several (the tasks one failed write lost), and what was held
back when the failures stopped is still told (`flush`)."""

import logging

from plugins_app.services.log_once import OncePerInterval

logger = logging.getLogger("tests.log_once")


def once(now):
    return OncePerInterval(logger, seconds=10.0, clock=lambda: now[0])


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == logger.name]


def test_counts_add_up_what_each_call_stands_for(caplog):
    now = [0.0]
    log = once(now)
    with caplog.at_level(logging.ERROR, logger=logger.name):
        for lost in (100, 100, 3, 50):   # within one interval: one line, the rest held back
            log.log("lost", logging.ERROR, "lost %d task(s)", lost, count=lost)
            now[0] += 1
        now[0] = 12
        log.log("lost", logging.ERROR, "lost %d task(s)", 7, count=7)
    assert messages(caplog) == ["lost 100 task(s)", "lost 7 task(s) (153 more since the last such line, 12 s ago)"]


def test_flush_tells_what_was_held_back_once_its_interval_is_over(caplog):
    now = [0.0]
    log = once(now)
    with caplog.at_level(logging.ERROR, logger=logger.name):
        log.log("lost", logging.ERROR, "lost %d task(s)", 5, count=5)
        for lost in (10, 20):
            now[0] += 1
            log.log("lost", logging.ERROR, "lost %d task(s)", lost, count=lost)
        assert log.flush() == 0   # the interval is not over: nothing yet
        now[0] = 10
        assert log.flush() == 1
        assert log.flush() == 0   # told once
        now[0] = 30
        assert log.flush() == 0   # nothing held back since
        log.log("lost", logging.ERROR, "lost %d task(s)", 1, count=1)   # the interval is over: written at once
    assert messages(caplog) == ["lost 5 task(s)", "lost 20 task(s) (10 more since the last such line, 10 s ago)",
                                "lost 1 task(s)"]


def test_a_single_call_held_back_is_flushed_without_a_count(caplog):
    now = [0.0]
    log = once(now)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        log.log("outage", logging.WARNING, "away")
        now[0] = 5
        log.log("outage", logging.WARNING, "away")
        now[0] = 15
        log.flush()
    assert messages(caplog) == ["away", "away"]
