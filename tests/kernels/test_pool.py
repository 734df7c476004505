"""The thread pool: sizes, every item exactly once under many tiny and a few huge jobs, abort
mid-job from another thread, the GIL released during calls, an idle pool using no CPU."""

from __future__ import annotations

import threading
import time

import numpy as np
import psutil
import pytest

import app.kernels as K

IDLE_CPU_FRACTION = 0.05  # an idle pool may use at most 5% of one core


def test_size_is_physical_cores_and_never_above_allowed():
    with K.ThreadPool() as p:
        assert p.size == min(K.cpu_count_physical(), K.cpu_count_allowed())
    with K.ThreadPool(10_000) as p:
        assert p.size == K.cpu_count_allowed()
    with K.ThreadPool(1) as p:
        assert p.size == 1


def test_many_tiny_jobs():
    with K.ThreadPool(2) as p:
        counts = np.zeros(7, np.int32)
        for _ in range(2000):
            p.test_job(7, 1, 0, counts)
        assert (counts == 2000).all()
        assert p.jobs == 2000


def test_few_huge_jobs_are_shared():
    with K.ThreadPool(2) as p:
        for chunk in (1, 5, 1000):
            counts = np.zeros(3001, np.int32)
            p.test_job(3001, chunk, 2000, counts)
            assert (counts == 1).all()
        busy = p.busy_ns()
        assert len(busy) == p.size and all(b > 0 for b in busy)
        if p.size > 1:
            assert sum(p.chunks()[1:]) > 0  # the workers took part


def test_abort_mid_job_from_another_thread():
    with K.ThreadPool(2) as p:
        counts = np.zeros(4000, np.int32)
        threading.Timer(0.05, p.abort).start()
        t0 = time.perf_counter()
        with pytest.raises(K.KernelAborted):
            p.test_job(4000, 1, 200_000, counts)  # seconds of work if not aborted
        assert time.perf_counter() - t0 < 2.0
        assert 0 < counts.sum() < 4000
        assert counts.max() == 1
        assert p.aborted
        with pytest.raises(K.KernelAborted):  # sticky until cleared
            p.test_job(10, 1, 0)
        p.clear_abort()
        counts[:] = 0
        p.test_job(100, 1, 0, counts)
        assert (counts[:100] == 1).all() and counts[100:].sum() == 0


def test_kernel_calls_release_the_gil():
    with K.ThreadPool(1) as p:
        ticks = 0
        done = threading.Event()

        def long_job():
            p.test_job(200, 1, 100_000)
            done.set()

        th = threading.Thread(target=long_job)
        th.start()
        while not done.is_set():
            ticks += 1
            time.sleep(0)
        th.join()
        assert ticks > 10


def test_idle_pool_uses_no_cpu():
    proc = psutil.Process()
    with K.ThreadPool(2) as p:
        p.test_job(1000, 10, 100)
        time.sleep(0.2)  # past the spin window: workers now sleep
        c0 = proc.cpu_times()
        time.sleep(0.5)
        c1 = proc.cpu_times()
        used = (c1.user - c0.user) + (c1.system - c0.system)
        assert used < IDLE_CPU_FRACTION * 0.5, f"idle pool used {used:.3f} s of CPU in 0.5 s"
        counts = np.zeros(50, np.int32)  # and wakes up again
        p.test_job(50, 1, 0, counts)
        assert (counts == 1).all()


def test_closed_pool_raises():
    p = K.ThreadPool(2)
    p.close()
    with pytest.raises(K.KernelError):
        p.test_job(1)


def test_second_driver_gets_busy_not_corruption():
    with K.ThreadPool(2) as p:
        started = threading.Event()
        errors = []

        def long_job():
            started.set()
            p.test_job(300, 1, 100_000)

        th = threading.Thread(target=long_job)
        th.start()
        started.wait()
        time.sleep(0.02)
        try:
            p.test_job(10, 1, 0)
        except K.KernelError as exc:
            errors.append(str(exc))
        th.join()
        assert errors and "busy" in errors[0]
        counts = np.zeros(10, np.int32)
        p.test_job(10, 1, 0, counts)  # free again afterwards
        assert (counts == 1).all()


def test_pools_come_and_go_without_leaking_threads():
    proc = psutil.Process()
    before = proc.num_threads()
    for _ in range(50):
        with K.ThreadPool(2) as p:
            p.test_job(20, 1, 0)
    assert proc.num_threads() <= before  # (other runtimes may end threads meanwhile)


def test_describe_names_the_level():
    line = K.describe()
    assert K.isa_name() in line and "cores" in line


def _stall_jobs(p, seconds, counts=None, until_narrow=False):
    """Back-to-back jobs of two items whose worker-side item takes 2 ms (the caller's 1/6 of
    that, time for the worker to claim its own): the driver waits on the worker each time, as
    it would on a thread the OS does not run. Returns the number of jobs."""
    cptr = K.ffi.cast("int32_t *", K.ffi.from_buffer(counts)) if counts is not None else K.ffi.NULL
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds and not (until_narrow and p.width < p.size):
        assert K.lib.llk_pool_test_stall_job(p.ptr, 2, 2000, cptr) == 0
        n += 1
    return n


def test_the_pool_narrows_while_its_jobs_wait_on_a_thread_and_widens_again():
    with K.ThreadPool(2) as p:
        if p.size < 2:
            pytest.skip("one CPU: nothing to narrow")
        counts = np.zeros(2, np.int32)
        n = _stall_jobs(p, 5.0, counts, until_narrow=True)
        assert p.width == 1  # the driver now does every item itself
        assert (counts == n).all()  # each item of each job ran exactly once
        p.test_job(100, 1, 0)  # nothing stalls now ...
        time.sleep(1.1)  # ... and after the probe interval
        p.test_job(100, 1, 0)
        assert p.width == 2  # it tries both threads again


def test_the_pool_counts_the_drivers_waits_on_stalled_threads():
    with K.ThreadPool(1) as one:
        one.test_job(100, 1, 1000)
        assert one.waits() == (0, 0)  # no other thread to wait on
    with K.ThreadPool(2) as p:
        if p.size < 2:
            pytest.skip("one CPU: nobody to wait on")
        p.set_adaptive(False)
        t0 = time.perf_counter()
        while p.waits()[1] < 3 and time.perf_counter() - t0 < 5.0:
            _stall_jobs(p, 0.05)
        wait_ns, stalls = p.waits()
        assert stalls >= 3  # the worker's 2 ms items held the driver up
        assert wait_ns >= stalls * 100_000  # each of those waits was over 100 us


def test_a_fixed_pool_keeps_its_width():
    with K.ThreadPool(2) as p:
        if p.size < 2:
            pytest.skip("one CPU: nothing to narrow")
        p.set_adaptive(False)
        _stall_jobs(p, 0.5)
        assert p.width == 2
