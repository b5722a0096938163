"""gunicorn settings read when the hub is served from this directory: one core per worker."""

import os


def post_fork(server, worker):
    # A sync worker and its hook engines take turns (the worker waits while its engine runs a
    # chain), so they never need two cores at once. On one core every hand-off between them is a
    # local wake-up rather than a cross-core one, which is most of an engine round trip's cost.
    # Engine processes inherit the pin. HUB_PIN_WORKERS=0 leaves scheduling to the kernel.
    if os.environ.get("HUB_PIN_WORKERS", "1") == "0" or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[worker.age % len(cpus)]})
        server.log.info("worker %s pinned to cpu %s", worker.pid, cpus[worker.age % len(cpus)])
