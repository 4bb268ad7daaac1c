"""Disk cache of computed results, keyed by the call and by the code that produced it.

A call ``func(**kwargs)`` is stored under a key made of

* the qualified name of the function (``module.qualname``),
* its keyword arguments in a canonical JSON form (floats exactly, by their hexadecimal form;
  arrays by dtype, shape and a hash of their bytes; dataclasses such as
  :class:`~attn_lib.model.setting.Setting` field by field; dictionaries with sorted keys),
* :func:`code_hash` of the function and of the code-bearing arguments (callables, and the class
  of each dataclass instance, e.g. a ``Setting`` or a ``Setting(f=nonlinearity.normalised(...))``):
  the source of every ``attn_lib`` definition they depend on, and the versions of the other
  packages that code uses (:func:`dependencies` lists them).

**Dependencies.** A *definition* is a top-level ``def``, ``class`` or assignment of a module of
``attn_lib``; its code is its statement, normalised through :mod:`ast` (comments, layout and
docstrings -- every statement that is only a string -- dropped). A definition depends on the
global names and ``module.attribute`` chains its code uses, resolved statically through the
imports of its module (also imports inside a function) into ``attn_lib``, transitively: a
function on the functions, classes and constants it names, a class on its bases, decorators and
the names its methods use, an assignment such as a registry on what its value names. A module
used bare (not as ``module.attribute``) counts as all its definitions. Top-level statements that
bind no name but name a global (``REGISTRY.update(...)``) belong to that global's definition.
Names outside ``attn_lib`` enter by the *version* of their top-level package (``numpy``,
``scipy``, ...; the standard library by Python's ``major.minor``), since a new NumPy or SciPy
may change the numbers bit for bit; the versions are pinned (``constraints.txt``), so they change
only on purpose. The definitions of this module are not followed (they store results, they do
not compute them). A function defined outside the library (a test, a notebook cell) enters by
its own normalised source, and the names it uses are followed through its globals at run time;
the *values* of its global variables do not enter (pass them as arguments).

Hence editing prose, a docstring, a comment or the plotting (``book/style.py``, the figures)
leaves every stored result valid; editing the theory invalidates the cached theory but not the
simulations, whose code does not reach ``attn_lib.theory``; editing the simulator's arithmetic
(``simulation/simulate.py``, ``model/kernel.py``, ``model/hermite.py``, ...) invalidates the
simulations. The analysis is per process and memoised: each module is parsed once and each
object's dependencies are found once, so the key describes the sources as first read (as the
imported code is; restart the kernel after editing the library).

**Storage.** An entry is plain data, so that reading one runs no code (a cache that many
workers of a cluster share is read by all of them): a ``.npz`` archive of the result's arrays,
``0.npy, 1.npy, ...`` (written and read with ``allow_pickle=False``), with a member
``structure.json`` describing how they fit together. Entries hold a closed set of types --
``None``, ``bool``, ``int``, ``float`` (exactly, by its hexadecimal form), ``str``; NumPy arrays
without Python objects and NumPy scalars (as 0-d arrays: dtype kept); ``list``, ``tuple``;
``dict`` with ``str`` or tuple-of-``str`` keys, in their order; and the library's result classes
of :data:`RESULT_TYPES` (dataclasses such as
:class:`~attn_lib.simulation.simulate.SimulationResult`), field by field. A class is named in
the file by ``module.qualname`` and read back only if that name is in :data:`RESULT_TYPES`:
nothing is imported by a name that comes from a file. Storing another type raises
``TypeError``. An entry is written atomically: the bytes go to a temporary file in the same
folder, which is then renamed over the final name with :func:`os.replace`, so an interrupted
run never leaves a partial entry under a valid name. An unreadable entry (corrupt, truncated, of
an unknown type, or a pickle of an older version: those ``.pkl`` files are never opened) is a
miss. The cache folder is ``$ATTN_BOOK_CACHE`` if set, else ``<repository>/.cache/attn-book``;
delete it (or call :func:`clear`) to start afresh. Setting ``ATTN_BOOK_CACHE=off`` disables the
cache.

**Where the work runs.** The definitions of this module and of
:mod:`attn_lib.simulation.executor` are not followed: they store results and choose where tasks
run, and a result is the same in every mode (``tests/test_distributed.py``; bit for bit at the
same number of BLAS threads per trial, to rounding otherwise), so entries are shared by serial
runs and cluster runs. A call made on a worker of a cluster computes the same
key and reads and writes the same files (with ``ATTN_BOOK_CACHE`` set to a folder all workers
see). :func:`entry` looks a call up without running it, for callers (a sweep) that compute
many calls together and store each when it is done.

**Log.** With ``ATTN_BOOK_CACHE_LOG=1`` every :func:`cached` call prints one line on stdout,
``attn-book cache: hit|miss <module.qualname> <key prefix>``; any other value (not ``0``/``off``)
is a file the lines are appended to, e.g. one log for a whole book build.

Examples
--------
>>> from attn_lib import Setting, simulate
>>> from attn_lib import cache
>>> res = cache.cached(simulate.errors, setting=Setting(c=0.5, snr=1.0), gammas=[1e-2, 1.0],
...                    n=64, trials=2, seed=0)                      # doctest: +SKIP
>>> "attn_lib.model.kernel.attention_kernel" in cache.dependencies(simulate.errors)
True
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import json
import math
import os
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["cache_dir", "dependencies", "code_hash", "key", "Entry", "entry", "cached", "memoize",
           "clear", "RESULT_TYPES"]

T = TypeVar("T")

#: Folder of the library whose definitions are followed (its name is the package's import name).
PACKAGE_DIR = Path(__file__).resolve().parent
_FORMAT = 3  # bump when the on-disk layout or the key's recipe changes (3: .npz + JSON)
_PYTHON = "{}.{}".format(*sys.version_info[:2])
_LOG_OFF = {"", "0", "off", "no", "false"}
_LOG_STDOUT = {"1", "on", "yes", "true", "stdout"}
#: Modules whose definitions do not enter a key: this one, and where the tasks run.
_NOT_FOLLOWED = frozenset({__name__, f"{__package__}.simulation.executor"})

#: The library's result classes an entry may hold (``module.qualname``; dataclasses, stored field
#: by field). A class is imported only through this table, never by a name read from a file.
RESULT_TYPES = (
    "attn_lib.simulation.trials.Trials",
    "attn_lib.simulation.simulate.SimulationResult",
    "attn_lib.studies.gpt2.MonteCarlo",
    "attn_lib.studies.gpt2.Summary",
    "attn_lib.studies.gpt2.Spectrum",
    "attn_lib.studies.gpt2.Fit",
)

# A target of a name: ("def", module, name) a definition of the library, ("module", module) a
# module of the library (standing for all its definitions), ("external", package) a package
# outside it, ("foreign", object) a function or class defined outside any package.
_Target = tuple[Any, ...]


def cache_dir() -> Path:
    """Folder of the cache: ``$ATTN_BOOK_CACHE`` or ``<repository>/.cache/attn-book``."""
    env = os.environ.get("ATTN_BOOK_CACHE")
    if env:
        return Path(env).expanduser()
    return PACKAGE_DIR.parent / ".cache" / "attn-book"


def _enabled() -> bool:
    return os.environ.get("ATTN_BOOK_CACHE", "").strip().lower() not in {"off", "0", "none"}


# ------------------------------------------------------------------ normalised source
def _normalised(tree: ast.AST) -> str:
    """``ast.dump`` of ``tree`` without its string statements (docstrings); positions dropped."""
    tree = _StripStrings().visit(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


class _StripStrings(ast.NodeTransformer):
    """Drop every statement that is only a string constant (docstrings, attribute docs)."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [s for s in stmts if not (isinstance(s, ast.Expr)
                                                 and isinstance(s.value, ast.Constant)
                                                 and isinstance(s.value.value, str))]
                setattr(node, field, kept or [ast.Pass()])
        return node


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _chains(tree: ast.AST) -> Iterator[tuple[str, ...]]:
    """Names and ``name.attr.attr`` chains used in ``tree`` (the longest chain of each use)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute):
            attrs: list[str] = []
            base: ast.expr = node
            while isinstance(base, ast.Attribute):
                attrs.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                yield (base.id, *reversed(attrs))
                continue
        elif isinstance(node, ast.Name):
            yield (node.id,)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _stored_names(stmt: ast.stmt) -> set[str]:
    """Global names a top-level statement binds (``def``, ``class``, assignment targets, ...).

    ``x[k] = v`` and ``x.a = v`` bind nothing (their ``x`` is loaded); compound statements
    (``if``, ``try``, ``with``, ``for``) bind everything bound inside them.
    """
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        scope: Sequence[ast.AST] = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    else:
        scope = [stmt]
    names: set[str] = set()
    for node in (n for part in scope for n in ast.walk(part)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    return names


# ------------------------------------------------------------------ modules of the library
@dataclasses.dataclass(frozen=True)
class _Module:
    """A parsed module: its definitions and the names its imports bind."""

    definitions: dict[str, str]          # name -> hash of its normalised statements
    uses: dict[str, tuple[tuple[str, ...], ...]]  # name -> chains its statements use
    local_imports: dict[str, dict[str, list[_Target]]]  # name -> bindings of imports inside it
    imports: dict[str, list[_Target]]    # names bound by top-level imports
    stars: tuple[str, ...]               # modules of ``from x import *``


def _is_library(name: str, root: Path) -> bool:
    """Whether the module ``name`` belongs to the library at ``root`` (named ``root.name``)."""
    return name == root.name or name.startswith(root.name + ".")


def _module_file(root: Path, name: str) -> Path | None:
    parts = name.split(".")[1:]
    base = root.joinpath(*parts)
    for path in (base.with_suffix(".py") if parts else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


def _import_targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
                    root: Path) -> tuple[dict[str, list[_Target]], list[str]]:
    """Names bound by one import statement in ``module``, and its ``*`` sources."""
    bound: dict[str, list[_Target]] = {}
    stars: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = alias.name if alias.asname else alias.name.split(".")[0]
            bound[alias.asname or target] = [_module_target(target, root)]
        return bound, stars
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    for alias in node.names:
        if alias.name == "*":
            stars.append(base)
        elif _is_library(base, root):
            bound[alias.asname or alias.name] = [("attribute", base, alias.name)]
        else:
            bound[alias.asname or alias.name] = [("external", base.split(".")[0])]
    return bound, stars


def _module_target(name: str, root: Path) -> _Target:
    return ("module", name) if _is_library(name, root) else ("external", name.split(".")[0])


@functools.lru_cache(maxsize=None)
def _parse(root: Path, name: str) -> _Module | None:
    """The module ``name`` of the library at ``root``, parsed once per process."""
    path = _module_file(root, name)
    if path is None:
        return None
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    statements: dict[str, list[ast.stmt]] = {}
    imports: dict[str, list[_Target]] = {}
    stars: list[str] = []
    unbound: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            bound, star = _import_targets(stmt, name, is_package, root)
            for k, v in bound.items():
                imports.setdefault(k, []).extend(v)
            stars.extend(star)
            continue
        names = _stored_names(stmt)
        for n in names:
            statements.setdefault(n, []).append(stmt)
        if not names:
            unbound.append(stmt)
    for stmt in unbound:  # e.g. REGISTRY.update(...): part of the globals it names
        for chain in _chains(stmt):
            if chain[0] in statements and stmt not in statements[chain[0]]:
                statements[chain[0]].append(stmt)
    definitions, uses, local_imports = {}, {}, {}
    for n, stmts in statements.items():
        definitions[n] = _sha("\n".join(_normalised(s) for s in stmts))
        uses[n] = tuple(sorted({c for s in stmts for c in _chains(s)}))
        inner: dict[str, list[_Target]] = {}
        for s in stmts:
            for node in ast.walk(s):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for k, v in _import_targets(node, name, is_package, root)[0].items():
                        inner.setdefault(k, []).extend(v)
        local_imports[n] = inner
    return _Module(definitions=definitions, uses=uses, local_imports=local_imports,
                   imports=imports, stars=tuple(stars))


def _lookup(root: Path, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> list[_Target]:
    """Targets of the global ``name`` of the library module ``module`` (``[]`` if not global)."""
    mod = _parse(root, module)
    if mod is None or (module, name) in seen:
        return []
    seen = seen | {(module, name)}
    if name in mod.definitions:
        return [("def", module, name)]
    out: list[_Target] = []
    for target in mod.imports.get(name, []):
        out.extend(_resolve_attribute(root, target, seen))
    for star in mod.stars:
        out.extend(_lookup(root, star, name, seen) if _is_library(star, root)
                   else [("external", star.split(".")[0])])
    return out


def _resolve_attribute(root: Path, target: _Target, seen: frozenset[tuple[str, str]] = frozenset()) -> list[_Target]:
    """Resolve ``("attribute", module, name)`` (``from module import name``) to targets."""
    if target[0] != "attribute":
        return [target]
    _, module, name = target
    found = _lookup(root, module, name, seen)
    if found:
        return found
    sub = f"{module}.{name}"
    if _module_file(root, sub) is not None:
        return [("module", sub)]
    return [("module", module)]  # unknown attribute: the whole module, to be safe


def _follow(root: Path, targets: list[_Target], attrs: tuple[str, ...]) -> list[_Target]:
    """Targets of ``x.attrs[0].attrs[1]...`` for each target of ``x``."""
    out = []
    for target in targets:
        rest = attrs
        current = [target]
        while rest and current and all(t[0] == "module" for t in current):
            current = [r for t in current
                       for r in _resolve_attribute(root, ("attribute", t[1], rest[0]))]
            rest = rest[1:]
        out.extend(current)
    return out


def _edges(root: Path, target: _Target) -> list[_Target]:
    """What a library definition or module uses directly."""
    if target[0] == "module":
        mod = _parse(root, target[1])
        if mod is None:
            return []
        return [t for n in (*mod.definitions, *mod.imports)
                for t in _lookup(root, target[1], n)]
    _, module, name = target
    mod = _parse(root, module)
    assert mod is not None  # an "attribute" target names a module of the library
    out: list[_Target] = []
    for chain in mod.uses[name]:
        base = mod.local_imports[name].get(chain[0])
        base = ([t for b in base for t in _resolve_attribute(root, b)] if base
                else _lookup(root, module, chain[0]))
        out.extend(_follow(root, base, chain[1:]))
    return out


# ------------------------------------------------------------------ objects at run time
def _stdlib(package: str) -> bool:
    return package in sys.stdlib_module_names or package in sys.builtin_module_names


@functools.lru_cache(maxsize=None)
def _version(package: str) -> str | None:
    """Version of the distribution that installs the top-level module ``package``, or ``None``."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pass
    for dist in _distributions().get(package, []):
        return importlib.metadata.version(dist)
    return None


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def _installed(package: str) -> bool:
    """Whether ``package`` is in the standard library or in an installed distribution."""
    return _stdlib(package) or _version(package) is not None


def _runtime_targets(obj: Any, root: Path) -> list[_Target]:
    """Targets of an object met at run time (an argument, or a global of a foreign function)."""
    if inspect.ismodule(obj):
        return [_module_target(obj.__name__, root)] if (
            _is_library(obj.__name__, root) or _installed(obj.__name__.split(".")[0])) else []
    if not callable(obj):
        return []
    if not isinstance(obj, type) and not inspect.isroutine(obj):
        obj = type(obj)  # a callable instance: its class
    obj = inspect.unwrap(obj)
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and _is_library(module, root):
        top = (getattr(obj, "__qualname__", "") or "").split(".")[0]
        return _lookup(root, module, top) or [("module", module)]
    if isinstance(module, str) and _installed(module.split(".")[0]):
        return [("external", module.split(".")[0])]
    return [("foreign", obj)]


def _foreign(obj: Any, root: Path) -> tuple[str, list[_Target]]:
    """Hash of the normalised source of a function or class defined outside any package, and
    the targets of the names it uses, looked up in its globals at run time."""
    try:
        source = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError) as exc:
        raise TypeError(f"cannot build a cache key for {obj!r}: its source is not available "
                        f"({exc})") from exc
    tree = ast.parse(source)
    namespace = getattr(obj, "__globals__", None)
    if namespace is None:  # a class: the globals of its module
        module = sys.modules.get(obj.__module__)
        namespace = vars(module) if module is not None else {}
    out: list[_Target] = []
    for chain in sorted(set(_chains(tree))):
        if chain[0] in namespace:  # else a local, a parameter or a builtin
            out.extend(_runtime_chain(namespace[chain[0]], chain[1:], root))
    return _sha(_normalised(tree)), out


def _runtime_chain(value: Any, attrs: tuple[str, ...], root: Path) -> list[_Target]:
    """Targets of ``value.attrs[0].attrs[1]...``: walked at run time through modules defined
    outside any package, then statically through the library (:func:`_follow`)."""
    while (attrs and inspect.ismodule(value) and hasattr(value, attrs[0])
           and not _runtime_targets(value, root)):
        value, attrs = getattr(value, attrs[0]), attrs[1:]
    return _follow(root, _runtime_targets(value, root), attrs)


@functools.lru_cache(maxsize=None)
def _closure(obj: Any, root: Path) -> tuple[tuple[str, str], ...]:
    """``(name, hash or version)`` of everything ``obj`` depends on, sorted (memoised)."""
    found: dict[str, str] = {"python": _PYTHON}
    stack = _runtime_targets(obj, root)
    seen: set[_Target] = set()
    while stack:
        target = stack.pop()
        if target in seen:
            continue
        seen.add(target)
        kind = target[0]
        if kind == "external":  # the standard library is "python" (always in the key)
            if not _stdlib(target[1]):
                found[target[1]] = str(_version(target[1]))
        elif kind == "foreign":
            fobj = target[1]
            digest, more = _foreign(fobj, root)
            found[f"{getattr(fobj, '__module__', None)}.{fobj.__qualname__}"] = digest
            stack.extend(more)
        elif kind == "module":
            if target[1] not in _NOT_FOLLOWED:
                stack.extend(_edges(root, target))
        elif target[1] not in _NOT_FOLLOWED:  # a definition (see _NOT_FOLLOWED)
            mod = _parse(root, target[1])
            assert mod is not None  # a "def" target names a module of the library
            found[f"{target[1]}.{target[2]}"] = mod.definitions[target[2]]
            stack.extend(_edges(root, target))
    return tuple(sorted(found.items()))


def dependencies(*objs: Any, package_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Everything the code of ``objs`` depends on (see the module docstring).

    Parameters
    ----------
    *objs : function, class or module
        Usually the cached function and the code-bearing arguments of a call.
    package_dir : path, optional
        Folder of the library whose sources are read (default :data:`PACKAGE_DIR`); its name is
        the library's import name. Objects of the library are found there by module and name,
        so the keys of edited copies of the sources can be compared.

    Returns
    -------
    dict
        ``"module.name"`` of each library definition (and of each foreign function or class) ->
        SHA-256 of its normalised source; each outside package -> its version; ``"python"`` ->
        ``"major.minor"``. Sorted by name.
    """
    root = Path(package_dir).resolve() if package_dir is not None else PACKAGE_DIR
    out: dict[str, str] = {}
    for obj in objs:
        try:
            hash(obj)
        except TypeError:  # not memoised
            out.update(_closure.__wrapped__(obj, root))
        else:
            out.update(_closure(obj, root))
    return dict(sorted(out.items()))


def code_hash(*objs: Any, package_dir: str | os.PathLike[str] | None = None) -> str:
    """SHA-256 (hex) of :func:`dependencies` of ``objs``."""
    deps = dependencies(*objs, package_dir=package_dir)
    return _sha(json.dumps(deps, sort_keys=True, separators=(",", ":")))


# ------------------------------------------------------------------ keys
def _canonical(obj: Any, code: list[Any]) -> Any:
    """A JSON-serialisable, order-independent description of ``obj``.

    Callables met on the way, and the classes of dataclass instances, are appended to ``code``.

    Raises
    ------
    TypeError
        For objects without a stable description (lambdas, arbitrary instances).
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return {"float": x.hex() if math.isfinite(x) else repr(x)}
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype == object:
            return {"object_array": [_canonical(v, code) for v in arr.ravel().tolist()],
                    "shape": list(arr.shape)}
        return {"ndarray": arr.dtype.str, "shape": list(arr.shape),
                "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}
    if isinstance(obj, (list, tuple)):
        return {type(obj).__name__: [_canonical(v, code) for v in obj]}
    if isinstance(obj, dict):
        items = {}
        for k in obj:
            if not isinstance(k, str):
                raise TypeError(f"cache keys need str dictionary keys, got {k!r}")
            items[k] = _canonical(obj[k], code)
        return {"dict": dict(sorted(items.items()))}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        code.append(cls)
        fields = {f.name: _canonical(getattr(obj, f.name), code) for f in dataclasses.fields(obj)}
        return {"dataclass": f"{cls.__module__}.{cls.__qualname__}", "fields": fields}
    if callable(obj):
        name = getattr(obj, "__qualname__", "")
        module = getattr(obj, "__module__", None)
        if not name or "<lambda>" in name or "<locals>" in name or module is None:
            raise TypeError(f"cannot build a cache key for the callable {obj!r}: pass a registered "
                            "name or a module-level function")
        code.append(obj)
        return {"callable": f"{module}.{name}"}
    raise TypeError(f"cannot build a cache key for an object of type {type(obj).__name__}")


def _func_id(func: Callable[..., Any]) -> str:
    func = inspect.unwrap(func)
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', repr(func))}"


def key(func: Callable[..., Any], kwargs: dict[str, Any],
        package_dir: str | os.PathLike[str] | None = None) -> str:
    """Hex key of a call ``func(**kwargs)`` (see the module docstring for what enters it).

    ``package_dir`` is passed to :func:`code_hash` (default: the installed library).
    """
    code: list[Any] = [func]
    payload = {
        "format": _FORMAT,
        "func": _func_id(func),
        "kwargs": _canonical(dict(kwargs), code),
    }
    payload["code"] = code_hash(*code, package_dir=package_dir)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------ storage
_STRUCTURE = "structure.json"


class _Unknown(ValueError):
    """An entry names a type outside the closed set (a miss)."""


@functools.lru_cache(maxsize=None)
def _result_type(name: str) -> type[DataclassInstance]:
    """The class ``name`` of :data:`RESULT_TYPES` (imported through the table only)."""
    if name not in RESULT_TYPES:
        raise _Unknown(f"{name!r} is not one of cache.RESULT_TYPES")
    module, _, qualname = name.rpartition(".")
    cls = getattr(importlib.import_module(module), qualname)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)
            and f"{cls.__module__}.{cls.__qualname__}" == name):
        raise TypeError(f"cache.RESULT_TYPES names {name!r}, which is not a dataclass of that name")
    return cls


def _encode(obj: Any, arrays: list[np.ndarray]) -> Any:
    """JSON description of ``obj``; its arrays are appended to ``arrays`` (see the docstring)."""
    if obj is None or type(obj) in (bool, str):
        return obj
    if type(obj) is int:
        return {"int": str(obj)}
    if type(obj) is float:
        return {"float": obj.hex()}
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        if arr.dtype.hasobject:
            raise TypeError("the cache stores no arrays of Python objects")
        arrays.append(arr)
        return {"array" if isinstance(obj, np.ndarray) else "scalar": len(arrays) - 1}
    if type(obj) in (list, tuple):
        return {type(obj).__name__: [_encode(v, arrays) for v in obj]}
    if type(obj) is dict:
        items = []
        for k, v in obj.items():
            if not (type(k) is str or (type(k) is tuple and all(type(e) is str for e in k))):
                raise TypeError(f"the cache stores dictionaries with str or tuple-of-str keys, "
                                f"got the key {k!r}")
            items.append([k if type(k) is str else list(k), _encode(v, arrays)])
        return {"dict": items}
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if name in RESULT_TYPES and _result_type(name) is type(obj):
        fields = {f.name: _encode(getattr(obj, f.name), arrays)
                  for f in dataclasses.fields(_result_type(name))}
        return {"dataclass": name, "fields": fields}
    raise TypeError(f"the cache cannot store an object of type {name}: add it to "
                    "cache.RESULT_TYPES if it is a result dataclass of the library")


def _decode(node: Any, arrays: dict[int, np.ndarray]) -> Any:
    """Inverse of :func:`_encode`."""
    if node is None or type(node) in (bool, str):
        return node
    if type(node) is not dict:
        raise _Unknown(f"unknown entry node {node!r}")
    if node.keys() == {"dataclass", "fields"}:
        cls = _result_type(node["dataclass"])
        return cls(**{k: _decode(v, arrays) for k, v in node["fields"].items()})
    if len(node) != 1:
        raise _Unknown(f"unknown entry node {node!r}")
    ((tag, value),) = node.items()
    if tag == "int":
        return int(value)
    if tag == "float":
        return float.fromhex(value)
    if tag == "array":
        return arrays[value]
    if tag == "scalar":
        return arrays[value][()]
    if tag == "list":
        return [_decode(v, arrays) for v in value]
    if tag == "tuple":
        return tuple(_decode(v, arrays) for v in value)
    if tag == "dict":
        return {(k if type(k) is str else tuple(k)): _decode(v, arrays) for k, v in value}
    raise _Unknown(f"unknown entry node {tag!r}")


def _path(func: Callable[..., Any], k: str) -> Path:
    folder = _func_id(func).replace("<", "_").replace(">", "_")
    return cache_dir() / folder / f"{k}.npz"


def _load(path: Path) -> tuple[bool, Any]:
    """``(True, value)`` of the entry at ``path``; ``(False, None)`` if absent or unreadable."""
    try:
        with zipfile.ZipFile(path) as zf:
            structure = json.loads(zf.read(_STRUCTURE).decode("utf-8"))
            arrays = {}
            for name in zf.namelist():
                if name != _STRUCTURE:
                    with zf.open(name) as fh:
                        arrays[int(name.removesuffix(".npy"))] = np.lib.format.read_array(
                            fh, allow_pickle=False)
            return True, _decode(structure, arrays)
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, ValueError, TypeError):
        # Absent, corrupt, truncated, a pickle, or naming a type outside the closed set: a miss.
        return False, None


def _store(path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` as ``.npz`` + JSON, atomically (temporary file + os.replace).

    Raises
    ------
    TypeError
        If ``value`` holds a type outside the closed set (nothing is written).
    """
    arrays: list[np.ndarray] = []
    structure = json.dumps(_encode(value, arrays), separators=(",", ":"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
                zf.writestr(_STRUCTURE, structure)
                for i, arr in enumerate(arrays):
                    with zf.open(f"{i}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, arr, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _log(event: str, func: Callable[..., Any], k: str) -> None:
    """Report a hit or a miss as ``$ATTN_BOOK_CACHE_LOG`` asks (stdout or a file; never stderr)."""
    dest = os.environ.get("ATTN_BOOK_CACHE_LOG", "").strip()
    if dest.lower() in _LOG_OFF:
        return
    line = f"attn-book cache: {event} {_func_id(func)} {k[:12]}"
    if dest.lower() in _LOG_STDOUT:
        print(line, file=sys.stdout, flush=True)
    else:
        with open(Path(dest).expanduser(), "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


@dataclasses.dataclass(frozen=True)
class Entry:
    """The cache entry of one call, looked up (:func:`entry`) but not yet computed.

    Attributes
    ----------
    func : callable
    key : str or None
        :func:`key` of the call; ``None`` when the cache is off (then nothing is read or stored).
    hit : bool
        Whether the entry was read.
    value : object
        The stored result (``None`` on a miss).
    """

    func: Callable[..., Any]
    key: str | None
    hit: bool
    value: Any

    def store(self, value: Any) -> None:
        """Store the computed ``value`` of the call (nothing when the cache is off)."""
        if self.key is not None:
            _store(_path(self.func, self.key), value)


def entry(func: Callable[..., Any], /, **kwargs: Any) -> Entry:
    """Look up the call ``func(**kwargs)`` (logged as a hit or a miss) without computing it.

    Parameters and errors as in :func:`cached`, which is ``entry`` followed, on a miss, by the
    call and :meth:`Entry.store`.
    """
    if not _enabled():
        return Entry(func=func, key=None, hit=False, value=None)
    k = key(func, kwargs)
    hit, value = _load(_path(func, k))
    _log("hit" if hit else "miss", func, k)
    return Entry(func=func, key=k, hit=hit, value=value)


def cached(func: Callable[..., T], /, **kwargs: Any) -> T:
    """Return ``func(**kwargs)``, read from the disk cache when the same call was stored.

    Parameters
    ----------
    func : callable
        A module-level function (its ``module.qualname`` names the cache folder).
    **kwargs
        Keyword arguments only, so that the key does not depend on how they were passed.
        Values must be JSON-like (numbers, strings, lists, dicts), NumPy arrays, module-level
        callables or dataclasses of those (such as :class:`~attn_lib.model.setting.Setting`).

    Returns
    -------
    The (possibly cached) result, of the types an entry holds (see the module docstring).

    Raises
    ------
    TypeError
        If an argument has no stable description (e.g. a lambda), or the result is of a type
        an entry cannot hold.
    """
    found = entry(func, **kwargs)
    if found.hit:
        return found.value
    value = func(**kwargs)
    found.store(value)
    return value


def memoize(func: Callable[..., T]) -> Callable[..., T]:
    """Decorator form of :func:`cached`; the decorated function takes keyword arguments only."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> T:
        return cached(func, **kwargs)

    return wrapper


def clear() -> int:
    """Delete every cache entry (and the ``.pkl`` entries of older versions); return how many."""
    root = cache_dir()
    count = 0
    if root.is_dir():
        for pattern in ("*.npz", "*.pkl"):
            for path in root.rglob(pattern):
                path.unlink()
                count += 1
        for path in root.rglob("*.tmp"):
            path.unlink()
    return count
