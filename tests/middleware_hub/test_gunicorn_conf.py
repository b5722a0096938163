"""gunicorn.conf.py: each worker is pinned to one core (its engines inherit it), unless turned off."""

import multiprocessing
import os
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"


def _affinity_after_post_fork(age: int, pin_env: str | None) -> list[int]:
    if pin_env is not None:
        os.environ["HUB_PIN_WORKERS"] = pin_env
    post_fork = runpy.run_path(str(CONF))["post_fork"]
    log = SimpleNamespace(info=lambda *args: None)
    post_fork(SimpleNamespace(log=log), SimpleNamespace(age=age, pid=os.getpid()))
    return sorted(os.sched_getaffinity(0))


def _in_child(age: int, pin_env: str | None = None) -> list[int]:
    # A fresh process: pinning the test process itself would slow the rest of the suite.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_affinity_after_post_fork, (age, pin_env))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs at least two cores to pin to one")
def test_workers_are_spread_one_core_each():
    cpus = sorted(os.sched_getaffinity(0))
    assert _in_child(age=1) == [cpus[1 % len(cpus)]]
    assert _in_child(age=2) == [cpus[2 % len(cpus)]]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs at least two cores to pin to one")
def test_hub_pin_workers_0_leaves_the_worker_on_every_core():
    assert _in_child(age=1, pin_env="0") == sorted(os.sched_getaffinity(0))
