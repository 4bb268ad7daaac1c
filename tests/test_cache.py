"""The disk cache: hits, misses on parameter and code changes, keys that follow the code, and
entries that are plain data (``.npz`` + JSON: reading one runs no code)."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import pickle
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attn_lib import Setting, simulate, theory
from attn_lib import cache
from attn_lib.model import nonlinearity
from attn_lib.studies import sweeps

CALLS: list[dict] = []


def compute(a, b=1.0, arr=None):
    """A module-level function whose calls are counted."""
    CALLS.append({"a": a, "b": b})
    out = {"sum": a + b}
    if arr is not None:
        out["arr"] = np.asarray(arr) * 2
    return out


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_BOOK_CACHE", str(tmp_path / "cache"))
    CALLS.clear()
    return tmp_path / "cache"


def entries(root):
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_cache_dir_from_env(cache_env):
    assert cache.cache_dir() == cache_env


def test_default_cache_dir_is_in_repository(monkeypatch):
    monkeypatch.delenv("ATTN_BOOK_CACHE")
    assert cache.cache_dir() == cache.PACKAGE_DIR.parent / ".cache" / "attn-book"


def test_hit_returns_stored_value_without_recomputing(cache_env):
    first = cache.cached(compute, a=1.0, b=2.0, arr=np.arange(3))
    second = cache.cached(compute, a=1.0, b=2.0, arr=np.arange(3))
    assert len(CALLS) == 1
    assert second["sum"] == first["sum"] == 3.0
    np.testing.assert_array_equal(second["arr"], [0, 2, 4])
    assert len([p for p in entries(cache_env) if p.suffix == ".npz"]) == 1


def test_keyword_order_does_not_matter():
    cache.cached(compute, a=1.0, b=2.0)
    cache.cached(compute, b=2.0, a=1.0)
    assert len(CALLS) == 1


@pytest.mark.parametrize("changed", [
    {"a": 1.0, "b": 2.0 + 1e-12},
    {"a": 1.0, "b": 3.0},
    {"a": 1.0, "b": 2.0, "arr": np.arange(3)},
    {"a": 1.0, "b": 2.0, "arr": np.arange(3.0)},  # same values, other dtype
])
def test_miss_on_parameter_change(changed):
    cache.cached(compute, a=1.0, b=2.0)
    cache.cached(compute, **changed)
    assert len(CALLS) == 2


def test_miss_on_array_content_change():
    cache.cached(compute, a=1.0, arr=np.array([1.0, 2.0]))
    cache.cached(compute, a=1.0, arr=np.array([1.0, 2.5]))
    assert len(CALLS) == 2


def test_setting_keys():
    k1 = cache.key(compute, {"a": Setting(c=0.5, snr=1.0)})
    assert k1 == cache.key(compute, {"a": Setting(c=0.5, snr=1.0)})
    assert k1 != cache.key(compute, {"a": Setting(c=0.5, snr=1.5)})
    assert k1 != cache.key(compute, {"a": Setting(c=0.5, snr=1.0, f="cos")})


def test_unkeyable_arguments_are_refused():
    with pytest.raises(TypeError, match="callable"):
        cache.key(compute, {"a": lambda t: t})
    with pytest.raises(TypeError, match="object"):
        cache.key(compute, {"a": object()})


# ------------------------------------------------------------------ keys follow the code
FAKE = {
    "__init__.py": "from . import core, sim, theory\n",
    "core.py": '"""Shared arithmetic."""\n\nSCALE = 2.0\n\n\ndef helper(x):\n'
               '    """Scale x."""\n    return SCALE * x  # the one formula\n',
    "sim.py": "from . import core\nfrom .book import style\n\n\ndef simulate(x):\n"
              '    """A simulation."""\n    return core.helper(x) + 1.0\n',
    "theory.py": "from .core import helper\n\n\ndef predict(x):\n"
                 '    """A theory."""\n    return helper(x) - 1.0\n',
    "book/__init__.py": "",
    "book/style.py": "COLOR = 'red'\n\n\ndef plot():\n    return COLOR\n",
    "book/figures.py": "from .. import sim, theory\nfrom . import style\n\n\ndef figure():\n"
                       "    return style.plot(), sim.simulate(1.0), theory.predict(1.0)\n",
}


def write_package(folder, files):
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def logged(capsys):
    """``[(event, function name), ...]`` of the log lines printed since the last call."""
    out = capsys.readouterr()
    assert out.err == ""
    return [tuple(line.split()[2:4]) for line in out.out.splitlines()]


def test_miss_on_code_change_in_a_dependency(tmp_path, monkeypatch, capsys):
    """A fake library: each edit is a copy of it, read in place of the imported one."""
    monkeypatch.setenv("ATTN_BOOK_CACHE_LOG", "1")
    root = write_package(tmp_path / "v0" / "fakepkg", FAKE)
    monkeypatch.syspath_prepend(str(root.parent))
    import fakepkg
    for name in [m for m in sys.modules if m.split(".")[0] == "fakepkg"]:
        monkeypatch.delitem(sys.modules, name)  # forget it after the test (restored: absent)
    sim, theory = fakepkg.sim.simulate, fakepkg.theory.predict
    assert set(cache.dependencies(sim, package_dir=root)) == {  # style is imported, not used
        "fakepkg.core.SCALE", "fakepkg.core.helper", "fakepkg.sim.simulate", "python"}

    def run(version, **edits):
        folder = write_package(tmp_path / version / "fakepkg", {**FAKE, **edits})
        monkeypatch.setattr(cache, "PACKAGE_DIR", folder)
        assert cache.cached(sim, x=1.0) == 3.0 and cache.cached(theory, x=1.0) == 1.0
        return logged(capsys)

    sim_id, theory_id = "fakepkg.sim.simulate", "fakepkg.theory.predict"
    assert run("v1") == [("miss", sim_id), ("miss", theory_id)]
    assert run("v1") == [("hit", sim_id), ("hit", theory_id)]
    prose = {  # docstrings, comments, layout, plotting: every result stays valid
        "core.py": '"""Shared arithmetic, reworded."""\n\nSCALE = 2.0  # a comment\n\n\n'
                   'def helper(x):\n    """Scale ``x`` (edited prose)."""\n\n'
                   '    # a new comment\n    return SCALE*x\n',
        "book/style.py": "COLOR = 'blue'\n\n\ndef plot():\n    return COLOR * 2\n",
        "book/figures.py": FAKE["book/figures.py"] + "\n\ndef another():\n    return 0\n",
    }
    assert run("v2", **prose) == [("hit", sim_id), ("hit", theory_id)]
    assert run("v3", **{"theory.py": FAKE["theory.py"].replace("- 1.0", "- 2.0 + 1.0")}) == [
        ("hit", sim_id), ("miss", theory_id)]
    assert run("v4", **{"core.py": FAKE["core.py"].replace("SCALE = 2.0", "SCALE = 2.0 * 1.0")}
               ) == [("miss", sim_id), ("miss", theory_id)]


def test_log_to_a_file(tmp_path, monkeypatch, capsys):
    log = tmp_path / "cache.log"
    monkeypatch.setenv("ATTN_BOOK_CACHE_LOG", str(log))
    cache.cached(compute, a=1.0)
    cache.cached(compute, a=1.0)
    name = f"{compute.__module__}.compute"
    assert [line.split()[2:4] for line in log.read_text().splitlines()] == [
        ["miss", name], ["hit", name]]
    assert capsys.readouterr() == ("", "")


def test_no_log_by_default(capsys):
    cache.cached(compute, a=1.0)
    assert capsys.readouterr() == ("", "")


def test_key_of_a_foreign_function_follows_its_library_names():
    deps = cache.dependencies(compute_with_library)
    own = f"{compute_with_library.__module__}.compute_with_library"
    assert own in deps and "attn_lib.simulation.simulate.errors" in deps
    assert "attn_lib.model.kernel.attention_kernel" in deps
    assert deps["numpy"] == np.__version__


def compute_with_library(setting):
    """Defined outside the library: its own source and what it names both enter its key."""
    return simulate.errors(setting=setting, gammas=[1.0], n=8, trials=1)


@pytest.mark.parametrize("body, same", [
    ('def f(x):\n    """Edited prose."""\n    # a comment\n    return  2 * x\n', True),
    ("def f(x):\n    return 3 * x\n", False),
])
def test_foreign_source_is_normalised(tmp_path, body, same):
    def load(folder, text):
        path = folder / "foreign_mod.py"
        folder.mkdir()
        path.write_text(text)
        spec = importlib.util.spec_from_file_location("foreign_mod", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.f

    f0 = load(tmp_path / "a", 'def f(x):\n    """Double x."""\n    return 2 * x\n')
    f1 = load(tmp_path / "b", body)
    assert (cache.code_hash(f0) == cache.code_hash(f1)) is same


def test_unreadable_source_is_refused():
    namespace: dict = {"__name__": "scratch"}
    exec("def f(x):\n    return x\n", namespace)  # no file: no source to hash
    with pytest.raises(TypeError, match="source"):
        cache.key(namespace["f"], {"x": 1})


def test_key_is_memoised(monkeypatch):
    kwargs = {"setting": Setting(c=0.5, snr=1.0, f=nonlinearity.normalised("cos")), "n": 8}
    k = cache.key(simulate.errors, kwargs)

    def no_parse(*args, **kw):
        raise AssertionError("the dependencies are found once per process")

    monkeypatch.setattr(cache.ast, "parse", no_parse)
    assert cache.key(simulate.errors, kwargs) == k


def test_interrupted_write_leaves_no_partial_entry(cache_env, monkeypatch):
    real_writestr = zipfile.ZipFile.writestr

    def failing_writestr(self, name, data, *args, **kwargs):
        real_writestr(self, name, data[: len(data) // 2])  # some bytes reach the disk ...
        raise KeyboardInterrupt("interrupted while writing")  # ... then the run is killed

    monkeypatch.setattr(zipfile.ZipFile, "writestr", failing_writestr)
    with pytest.raises(KeyboardInterrupt):
        cache.cached(compute, a=1.0)
    assert entries(cache_env) == []  # neither a partial .npz nor a leftover temporary file

    monkeypatch.setattr(zipfile.ZipFile, "writestr", real_writestr)
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert len(CALLS) == 2  # recomputed once after the interruption, then read back
    assert [p.suffix for p in entries(cache_env)] == [".npz"]


def only_entry(root):
    (path,) = [p for p in entries(root) if p.suffix == ".npz"]
    return path


@pytest.mark.parametrize("damage", [
    lambda path: path.write_bytes(b"not an archive"),
    lambda path: path.write_bytes(path.read_bytes()[:-20]),  # truncated
    lambda path: path.write_bytes(b""),
])
def test_corrupt_entry_is_a_miss(cache_env, damage):
    cache.cached(compute, a=1.0)
    damage(only_entry(cache_env))
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert len(CALLS) == 2
    assert cache.cached(compute, a=1.0)["sum"] == 2.0  # rewritten whole
    assert len(CALLS) == 2


class Payload:
    """A pickle that runs code when it is loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))  # the file appears if the pickle runs


def test_a_pickle_is_a_miss_and_never_runs(cache_env, tmp_path):
    marker = tmp_path / "ran"
    cache.cached(compute, a=1.0)
    path = only_entry(cache_env)
    path.write_bytes(pickle.dumps(Payload(marker)))           # a pickle under the entry's name
    path.with_suffix(".pkl").write_bytes(pickle.dumps(Payload(marker)))  # an old-format entry
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert len(CALLS) == 2 and not marker.exists()


def rewrite_structure(path, edit):
    """Rewrite the ``structure.json`` member of an entry through ``edit(structure)``."""
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    members["structure.json"] = json.dumps(edit(json.loads(members["structure.json"]))).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


@pytest.mark.parametrize("name", [
    "tests.test_cache.Payload",                 # not a registered result type
    "attn_lib.model.setting.Setting",           # a library dataclass, but not a result type
    "os.system",
])
def test_an_entry_naming_an_unregistered_type_is_a_miss(cache_env, name):
    kwargs = dict(setting=Setting(c=0.5, snr=1.0), gammas=np.array([1.0]), n=16, trials=1)
    cache.cached(simulate.errors, **kwargs)
    path = only_entry(cache_env)
    rewrite_structure(path, lambda st: {**st, "dataclass": name})
    assert cache.entry(simulate.errors, **kwargs).hit is False
    rewrite_structure(path, lambda st: {**st, "dataclass": "attn_lib.simulation.trials.Trials"})
    assert type(cache.entry(simulate.errors, **kwargs).value).__name__ == "Trials"  # registered


def same(a, b):
    """``a`` and ``b`` equal exactly: the same types all the way down, arrays bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (np.ndarray, np.generic)):
        return (a.dtype == b.dtype and np.shape(a) == np.shape(b)
                and np.asarray(a).tobytes() == np.asarray(b).tobytes())
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def stored_types():
    """One value of each type an entry holds, including every class of ``RESULT_TYPES``."""
    from attn_lib.simulation.trials import Trials
    from attn_lib.studies import gpt2, hermite_linearisation
    rng = np.random.default_rng(0)
    g = np.array([1e-2, 1.0])
    setting = Setting(c=0.5, snr=1.0)
    mats = {"A": gpt2.normalise(rng.standard_normal((8, 8)))[0]}
    return {
        "scalars": [None, True, False, 0, -7, 2 ** 70, 0.1, -0.0, float("inf"), float("nan"),
                    "text", np.float64(0.1), np.int64(3), np.bool_(True), np.float32(1.5)],
        "arrays": (np.arange(6, dtype=np.int32).reshape(2, 3), np.array(2.5), np.zeros((0, 3)),
                   np.array([1 + 2j]), np.array(["a", "bc"]), np.asfortranarray(np.eye(3))),
        "dict": {"b": {"nested": [1, (2.0, "x")]}, "a": np.ones(2)},
        "tuple keys": {("attention", "A", "mu"): np.ones(2), ("ridge", "mu"): np.zeros(2)},
        "SimulationResult": simulate.errors(setting, g, n=16, trials=2, seed=1),
        "ridge only": simulate.errors(setting, g, n=16, trials=1, attention=False),
        "Trials": hermite_linearisation.error_gap(setting, g, n=16, trials=1),
        "MonteCarlo": gpt2.simulate_matrices(mats, {"mu": np.ones(8)}, "tanh", g, n=16),
        "Summary": gpt2.layer_summary(rng.standard_normal((8, 8)), k_max=4),
        "Trials()": Trials(values={}, gammas=np.float64(1.0), n=1, p=1),
    }


def test_every_stored_type_round_trips_exactly(cache_env):
    values = stored_types()
    types = {type(v) for v in values.values()} | {type(values["Summary"].fit),
                                                  type(values["Summary"].spectrum)}
    assert {f"{t.__module__}.{t.__qualname__}" for t in types} >= set(cache.RESULT_TYPES)
    for name, value in values.items():
        path = cache_env / f"{name}.npz"
        cache._store(path, value)
        hit, back = cache._load(path)
        assert hit and same(back, value), name
        assert back is not value


def test_a_type_outside_the_closed_set_is_refused(cache_env):
    for value in ({1: "int key"}, {"x": object()}, np.array([None]), Setting(c=0.5, snr=1.0),
                  {"a": {1, 2}}, [Payload("x")]):
        with pytest.raises(TypeError):
            cache._store(cache_env / "refused.npz", value)
    assert entries(cache_env) == []


def test_the_result_types_are_dataclasses_of_their_name():
    for name in cache.RESULT_TYPES:
        cls = cache._result_type(name)
        assert dataclasses.is_dataclass(cls) and f"{cls.__module__}.{cls.__qualname__}" == name


def test_where_the_work_runs_does_not_enter_a_key():
    deps = cache.dependencies(simulate.errors, sweeps.simulations)
    assert "attn_lib.simulation.trials.run_plans" in deps
    assert [k for k in deps if k.startswith("attn_lib.simulation.executor")] == []
    assert "dask" not in deps and "distributed" not in deps


def test_disabled_cache(cache_env, monkeypatch):
    monkeypatch.setenv("ATTN_BOOK_CACHE", "off")
    cache.cached(compute, a=1.0)
    cache.cached(compute, a=1.0)
    assert len(CALLS) == 2
    assert entries(cache_env) == []


def test_memoize_decorator():
    wrapped = cache.memoize(compute)
    assert wrapped(a=2.0)["sum"] == wrapped(a=2.0)["sum"] == 3.0
    assert len(CALLS) == 1
    assert wrapped.__name__ == "compute"


def test_clear(cache_env):
    cache.cached(compute, a=1.0)
    cache.cached(compute, a=2.0)
    assert cache.clear() == 2
    assert [p for p in entries(cache_env) if p.suffix == ".npz"] == []


def test_simulation_result_round_trip(cache_env):
    kwargs = dict(setting=Setting(c=0.5, snr=1.0), gammas=np.array([1e-2, 1.0]), n=16, trials=2,
                  seed=3)
    fresh = cache.cached(simulate.errors, **kwargs)
    stored = cache.cached(simulate.errors, **kwargs)
    assert isinstance(stored, simulate.SimulationResult)
    assert (stored.n, stored.p) == (fresh.n, fresh.p) == (16, 8)
    np.testing.assert_array_equal(stored.attention.values, fresh.attention.values)
    np.testing.assert_array_equal(stored.ridge.mean, fresh.ridge.mean)
    direct = simulate.errors(**kwargs)
    np.testing.assert_array_equal(stored.ridge.values, direct.ridge.values)
    assert len([p for p in entries(cache_env) if p.suffix == ".npz"]) == 1


# ------------------------------------------------------------------ keys of edited library copies
KW_SIM = dict(setting=Setting(c=0.5, snr=1.0), gammas=np.array([1e-2, 1.0]), n=64, trials=2, seed=0)
KW_THEORY = dict(setting=Setting(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0),
                 gammas=np.array([1e-2, 1.0]), n=512)  # chapter 9's finite-size theory


def copy_library(folder):
    return shutil.copytree(cache.PACKAGE_DIR, folder / "attn_lib",
                           ignore=shutil.ignore_patterns("__pycache__"))


def keys(root=None):
    return {"simulate.errors": cache.key(simulate.errors, KW_SIM, package_dir=root),
            "attention_error": cache.key(theory.attention_error, KW_THEORY, package_dir=root),
            "sweeps.simulations": cache.code_hash(sweeps.simulations, package_dir=root)}


def _definition(tree, qualname):
    node = tree
    for part in qualname.split(".") if qualname else ():
        node = next(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                    and n.name == part)
    return node


def _docstring(node):
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
            first.value.value, str):
        return first
    return None


def edit_prose(path, qualname=None):
    """Reword the docstring of ``qualname`` (the module's if None) and add comments."""
    data = path.read_bytes()
    doc = _docstring(_definition(ast.parse(data), qualname))
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    lo = starts[doc.lineno - 1] + doc.col_offset  # ast offsets count UTF-8 bytes
    hi = starts[doc.end_lineno - 1] + doc.end_col_offset
    new = data[:lo] + b'"""Reworded prose: no code here."""  # and a comment' + data[hi:]
    path.write_bytes(new + b"\n# a comment at the end\n")
    reworded = ast.get_docstring(_definition(ast.parse(new), qualname))
    assert reworded == "Reworded prose: no code here."


def edit_code(path, qualname=None, statement="_edited = 1.0"):
    """Insert ``statement`` at the start of the body of ``qualname`` (after its docstring)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    node = _definition(ast.parse("".join(lines)), qualname)
    doc = _docstring(node)
    if doc is not None:
        at, indent = doc.end_lineno, doc.col_offset
    else:
        at, indent = node.body[0].lineno - 1, node.body[0].col_offset
    lines.insert(at, " " * indent + statement + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def first_function(path):
    return next(n.name for n in ast.parse(path.read_text(encoding="utf-8")).body
                if isinstance(n, ast.FunctionDef))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return keys(copy_library(tmp_path_factory.mktemp("pristine")))


def test_a_copy_of_the_library_gives_the_same_keys(pristine):
    assert pristine == keys()


BOTH = {"simulate.errors", "sweeps.simulations"}


@pytest.mark.parametrize("edit, path, qualname, changed", [
    # prose: docstrings and comments, in the theory and in the simulator
    (edit_prose, "theory/attention.py", None, set()),
    (edit_prose, "theory/attention.py", "attention_error", set()),
    (edit_prose, "simulation/simulate.py", "errors", set()),
    (edit_prose, "model/setting.py", "Setting.canonical", set()),
    # plotting
    (edit_code, "book/style.py", first_function, set()),
    # the theory: cached theory results only
    (edit_code, "theory/attention.py", "attention_error", {"attention_error"}),
    (edit_code, "theory/_bulk.py", "solve_bulk", {"attention_error"}),
    # the simulator's arithmetic: the simulations (the theory does not use them)
    (edit_code, "model/kernel.py", "apply", BOTH),
    (edit_code, "simulation/simulate.py", "draw_errors", BOTH),
    (edit_code, "model/data.py", "draw", BOTH),
    # the Hermite data of every Setting argument: both
    (edit_code, "model/hermite.py", "_gauss_expect", BOTH | {"attention_error"}),
])
def test_keys_after_an_edit(tmp_path, pristine, edit, path, qualname, changed):
    root = copy_library(tmp_path)
    target = root / path
    edit(target, qualname(target) if callable(qualname) else qualname)
    after = keys(root)
    assert {name for name in after if after[name] != pristine[name]} == changed


def test_a_new_figure_module_changes_no_key(tmp_path, pristine):
    root = copy_library(tmp_path)
    (root / "book" / "figures" / "new_chapter.py").write_text(
        "from ...simulation import simulate\n\n\ndef figure(ax):\n    return simulate.errors\n")
    assert keys(root) == pristine


def test_the_nonlinearity_type_enters_the_key(tmp_path):
    # Every f, registered or rescaled, is evaluated by Nonlinearity.__call__; a factory that only
    # builds other instances (mixture) does not change a simulation that does not use it.
    wrapped = dict(KW_SIM, setting=Setting(c=0.5, snr=1.0, f=nonlinearity.normalised("tanh")))
    old, new, other = (copy_library(tmp_path / k) for k in ("old", "new", "other"))
    edit_code(new / "model" / "nonlinearity.py", "Nonlinearity.__call__")
    edit_code(other / "model" / "nonlinearity.py", "mixture")
    for kw in (wrapped, KW_SIM):
        assert cache.key(simulate.errors, kw, old) != cache.key(simulate.errors, kw, new)
        assert cache.key(simulate.errors, kw, old) == cache.key(simulate.errors, kw, other)


def test_simulations_do_not_reach_the_theory_or_the_book():
    for func in (simulate.errors, sweeps.simulations):
        deps = cache.dependencies(func)
        assert "attn_lib.model.kernel.attention_kernel" in deps
        assert [k for k in deps if k.startswith(("attn_lib.theory.", "attn_lib.book."))] == []
        assert deps["numpy"] == np.__version__
        assert deps["python"] == "{}.{}".format(*sys.version_info[:2])
    assert "attn_lib.theory._bulk.solve_bulk" in cache.dependencies(theory.attention_error)
