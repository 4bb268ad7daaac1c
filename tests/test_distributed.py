"""Where the Monte Carlo runs (:mod:`attn_lib.simulation.executor`): the mode is chosen by an
argument or ``$ATTN_BOOK_SCHEDULER``; a ``LocalCluster`` of two worker processes, reached by
its mode string and by its address, gives results bit-identical to the serial run (every mode runs
a trial with one BLAS thread); the result cache is shared by the client and the workers.

The serial tests need no Dask; the cluster tests are skipped where ``dask.distributed`` is not
installed (``make test`` installs it: the ``distributed`` extra).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from attn_lib import Setting, cache, simulate
from attn_lib.simulation import executor
from attn_lib.simulation.trials import Trials
from attn_lib.studies import gpt2, sweeps

GAMMAS = np.logspace(-3, 0, 4)
SETTING = Setting(c=0.5, snr=2.0, f="tanh", wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.5, cos_mu_wq=0.5)


# ----------------------------------------------------------------------------- the mode
@pytest.mark.parametrize("value, expected", [
    ("serial", ("serial", None)),
    ("local:3", ("local", 3)),
    (" local:12 ", ("local", 12)),
    ("tcp://10.0.0.5:8786", ("address", "tcp://10.0.0.5:8786")),
    ("tls://scheduler.example:8786", ("address", "tls://scheduler.example:8786")),
])
def test_mode_from_the_argument_and_from_the_environment(monkeypatch, value, expected):
    monkeypatch.delenv(executor.ENV, raising=False)
    assert executor.mode(value) == expected
    assert executor.mode() == ("serial", None)
    monkeypatch.setenv(executor.ENV, value)
    assert executor.mode() == expected
    assert executor.mode("serial") == ("serial", None)  # the argument wins
    monkeypatch.setenv(executor.ENV, "")
    assert executor.mode() == ("serial", None)


def test_local_defaults_to_one_worker_per_core():
    kind, workers = executor.mode("local")
    assert kind == "local" and workers >= 1


@pytest.mark.parametrize("bad", ["", "local:0", "local:-1", "local:two", "local:", "cluster",
                                 "http://host:8786", "tcp://", "tcp://host :1", "Serial"])
def test_bad_mode_strings_name_the_parameter(monkeypatch, bad):
    with pytest.raises(ValueError, match="^scheduler must be 'serial', 'local'"):
        executor.mode(bad)
    with pytest.raises(ValueError, match="^scheduler must be"):
        simulate.errors(SETTING, GAMMAS, n=16, trials=1, scheduler=bad)
    if bad.strip():
        monkeypatch.setenv(executor.ENV, bad)
        with pytest.raises(ValueError, match=f"^{executor.ENV} must be"):
            sweeps.simulations([SETTING], GAMMAS, 16, 1, use_cache=False)


def test_a_mode_must_be_a_string():
    with pytest.raises(TypeError, match="^scheduler must be a str"):
        executor.mode(2)


def test_serial_run_yields_jobs_in_order():
    out = list(executor.run([(abs, [-1, 2]), (str, []), (len, ["abc"])], scheduler="serial"))
    assert out == [(0, [1, 2]), (1, []), (2, [3])]


def test_progress_goes_to_the_file_named_by_the_environment(tmp_path, monkeypatch, capsys):
    """With ``$ATTN_BOOK_PROGRESS`` set, a run appends its bar there and writes nothing else."""
    path = tmp_path / "progress"
    monkeypatch.setenv(executor.PROGRESS, str(path))
    assert list(executor.run([(abs, [-1, 2]), (str, [3])], scheduler="serial")) == [
        (0, [1, 2]), (1, ["3"])]
    text = path.read_text()
    assert "Monte Carlo: 3 of 3 tasks done" in text, text
    assert capsys.readouterr() == ("", "")
    list(executor.run([(abs, [])], scheduler="serial"))  # nothing to run: no bar
    assert path.read_text() == text


def test_serial_needs_no_dask(tmp_path):
    """With ``dask`` unimportable the serial default runs; a cluster mode says what is missing."""
    script = textwrap.dedent("""
        import sys
        class NoDask:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("dask", "distributed"):
                    raise ImportError(f"no module named {name!r}")
        sys.meta_path.insert(0, NoDask())
        import numpy as np
        from attn_lib import Setting, simulate
        from attn_lib.studies import sweeps
        r = simulate.errors(Setting(c=0.5, snr=1.0), [1e-2, 1.0], n=16, trials=2)
        sweeps.simulations([Setting(c=0.5, snr=1.0)], [1.0], 16, 1, use_cache=False)
        assert not [m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")]
        try:
            simulate.errors(Setting(c=0.5, snr=1.0), [1.0], n=16, trials=1, scheduler="local:2")
        except ImportError as exc:
            print(exc)
    """)
    env = {"ATTN_BOOK_CACHE": "off", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": ":".join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "needs dask.distributed: pip install 'attn-lib[distributed]'" in done.stdout


# ----------------------------------------------------------------------------- on a cluster
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``local:2`` (2 worker processes, 1 thread each), sharing a fresh result cache.

    ``ATTN_BOOK_CACHE`` is set before the workers start, so they see the same folder.
    """
    pytest.importorskip("dask.distributed")
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("shared") / "cache"
        mp.setenv("ATTN_BOOK_CACHE", str(folder))
        mp.delenv(executor.ENV, raising=False)
        client = executor.client("local:2")
        yield client, client.scheduler.address, folder
        executor.shutdown()


def test_local_workers_have_one_thread_and_one_blas_thread(cluster):
    client, _, _ = cluster
    assert client.nthreads() and set(client.nthreads().values()) == {1}
    assert len(client.nthreads()) == 2
    blas = client.submit(executor._call, lambda _: [
        lib["num_threads"] for lib in executor._blas().info() if lib["user_api"] == "blas"],
        None).result()
    assert blas and set(blas) == {1}
    # without dask's heap trimming, which slowed the trials (see executor.client)
    assert set(client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_")).values()) == {None}


def test_simulate_errors_on_the_cluster_is_bit_identical(cluster):
    _, address, _ = cluster
    serial = simulate.errors(SETTING, GAMMAS, n=256, trials=3, seed=5)
    for mode in ("local:2", address):
        remote = simulate.errors(SETTING, GAMMAS, n=256, trials=3, seed=5, scheduler=mode)
        assert type(remote) is simulate.SimulationResult and (remote.n, remote.p) == (256, 128)
        assert remote.attention.values.tobytes() == serial.attention.values.tobytes()
        assert remote.ridge.values.tobytes() == serial.ridge.values.tobytes()


def test_a_sweep_on_the_cluster_is_bit_identical(cluster, monkeypatch):
    _, address, _ = cluster
    settings = [Setting(c=c, snr=snr, f=f) for c, snr, f in
                [(0.5, 1.0, "tanh"), (1.0, 2.0, "relu"), (2.0, 0.5, "cos")]]
    kw = dict(gammas=GAMMAS, n=[64, 128, 96], trials=3, seed=2, use_cache=False)
    serial = sweeps.simulations(settings, **kw)
    monkeypatch.setenv(executor.ENV, address)  # chosen by the environment
    remote = sweeps.simulations(settings, **kw)
    for model in ("attention", "ridge"):
        assert remote.values(model).tobytes() == serial.values(model).tobytes()
    np.testing.assert_array_equal(remote.p, serial.p)


def test_the_c_sweep_of_chapter_2_against_serial_runs(cluster):
    """Exact, also where a multithreaded BLAS changed 1 of these 18 curves by 3.3e-14: the serial
    run uses one BLAS thread per trial, as the workers do, whatever threads the process has."""
    settings = [Setting(c=float(c), snr=1.0) for c in np.geomspace(1 / 8, 2, 9)]
    kw = dict(gammas=1e-5, n=256, trials=2, seed=0, use_cache=False)
    remote = sweeps.simulations(settings, scheduler="local:2", **kw)
    serial = sweeps.simulations(settings, **kw)
    with threadpool_limits(limits=2, user_api="blas"):   # the process's threads do not enter
        threaded = sweeps.simulations(settings, **kw)
    for model in ("attention", "ridge"):
        assert remote.values(model).tobytes() == serial.values(model).tobytes()
        assert threaded.values(model).tobytes() == serial.values(model).tobytes()


def test_any_trials_run_goes_to_the_cluster(cluster, monkeypatch):
    """A Trials subclass with fixed matrices (GPT-2's Monte Carlo), through the environment."""
    _, address, _ = cluster
    rng = np.random.default_rng(1)
    mats = {"A": gpt2.normalise(rng.standard_normal((32, 32)))[0]}
    kw = dict(matrices=mats, mus={"mu": np.ones(32)}, f="tanh", gammas=GAMMAS, n=64, trials=3)
    serial = gpt2.simulate_matrices(**kw)
    monkeypatch.setenv(executor.ENV, address)
    remote = gpt2.simulate_matrices(**kw)
    assert type(remote) is gpt2.MonteCarlo and list(remote.values) == list(serial.values)
    for k in serial.values:
        assert remote.values[k].tobytes() == serial.values[k].tobytes()


def test_an_error_in_a_task_is_raised_in_the_client(cluster):
    _, address, _ = cluster

    def trial(rng):
        if rng.random() < 2.0:
            raise ArithmeticError("trial failed")
        return {}

    with pytest.raises(ArithmeticError, match="trial failed"):
        Trials.run(trial, trials=4, seed=0, gammas=GAMMAS, n=1, p=1, scheduler=address)


def test_the_cache_is_shared_with_the_workers(cluster):
    client, _, folder = cluster
    kw = dict(setting=SETTING, gammas=GAMMAS, n=32, trials=2, seed=9)
    assert client.submit(cache.key, simulate.errors, kw).result() == cache.key(simulate.errors, kw)
    # written by a worker, read by the client
    on_worker = client.submit(cache.cached, simulate.errors, **kw).result()
    found = cache.entry(simulate.errors, **kw)
    assert found.hit and found.value.attention.values.tobytes() == \
        on_worker.attention.values.tobytes()
    assert simulate.errors(**kw).attention.values.tobytes() == on_worker.attention.values.tobytes()
    assert len(list(folder.rglob("*.npz"))) == 1
    # written by the client (a sweep on the cluster), read by a worker
    sweeps.simulations([SETTING], GAMMAS, 48, 2, seed=9, scheduler="local:2")
    kw48 = dict(kw, n=48, attention=True)
    assert client.submit(lambda: cache.entry(simulate.errors, **kw48).hit).result()
    assert len(list(folder.rglob("*.npz"))) == 2
