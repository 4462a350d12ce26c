"""Every array a library call writes is booked as a write (``asyncgpu.runtime.effects``).

On ``sim`` an array booked as a read is handed to NumPy read-only and nothing the call does to
it is published, so a write the runtime did not book shows up as a fault or as the old values;
on a GPU it would be a missing dependency. The sweep runs every callable of the
``asyncgpu.cupy`` surface (top level, ``linalg``, ``fft``, ufunc methods, ``Array`` methods,
generator methods) on generated arguments, finds with NumPy itself which argument arrays each
call modifies, and checks that the runtime booked each of those as a write and ends with the
same bytes.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import numpy as np
import pytest

import asyncgpu.cupy as acp
from asyncgpu.runtime import array_modules, effects as _effects, library as _library
from asyncgpu.runtime import result_meta as _result_meta
from asyncgpu.runtime.context import Runtime
from asyncgpu.runtime.cupy_surface import sim_function


class Nodes:
    """An instrument keeping the accesses of every node (label -> write) by array."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []

    def node_added(self, node: Any) -> None:
        self.nodes.append(node)

    def writes(self, name: str, array: Any) -> list[bool]:
        """For each node of call ``name``: whether it books ``array``'s allocation as a write."""
        return [acc.write for n in self.nodes if n.kind == "call" and n.name == name
                for acc in n.accesses if acc.alloc is array._alloc]


# -- the programs users reported --------------------------------------------------------------
def test_positional_ufunc_output_is_written_and_read_back(sim):
    h = np.arange(6.0).reshape(2, 3)
    a, c = sim.array(h), sim.zeros((2, 3))
    with sim.instrument(Nodes()) as seen:
        r = acp.multiply(a, 3.0, c)
    assert seen.writes("multiply", c) == [True]
    assert seen.writes("multiply", a) == [False]
    assert r._alloc is c._alloc                      # the result is the output, as in CuPy
    np.testing.assert_array_equal(c.numpy(), h * 3.0)


def test_put_along_axis_writes_its_array(sim):
    h = np.arange(12.0).reshape(3, 4)
    idx = np.array([[3], [0], [2]])
    m, i, v = sim.array(h), sim.array(idx), sim.array(np.array([[-1.0], [-2.0], [-3.0]]))
    with sim.instrument(Nodes()) as seen:
        acp.put_along_axis(m, i, v, 1)
    assert seen.writes("put_along_axis", m) == [True]
    assert seen.writes("put_along_axis", i) == [False]
    want = h.copy()
    np.put_along_axis(want, idx, np.array([[-1.0], [-2.0], [-3.0]]), 1)
    np.testing.assert_array_equal(m.numpy(), want)


def test_generator_draw_into_a_positional_out_writes_it(sim):
    x, y = sim.zeros(6), sim.zeros(6)
    g = acp.random.default_rng(3)
    with sim.instrument(Nodes()) as seen:
        g.standard_normal(None, np.float64, x)
        g.random(out=y)
    assert seen.writes("random.Generator.standard_normal", x) == [True]
    assert seen.writes("random.Generator.random", y) == [True]
    want = np.random.default_rng(3)
    np.testing.assert_array_equal(x.numpy(), want.standard_normal(6))
    np.testing.assert_array_equal(y.numpy(), want.random(6))


def test_generator_shuffle_writes_its_array():
    """``shuffle`` permutes its argument in place (NumPy's generator has it, CuPy's not)."""
    slots = ("x",)
    assert _effects.effects("sim", "random.Generator.shuffle", slots, {}).places(
        slots, {}) == ["x"]


def test_written_array_orders_later_readers_and_writers(sim):
    """The positional output is a write of ``c`` in the DAG: a reader after it sees the new
    values and a writer before it cannot overtake it, in every schedule."""
    h = np.arange(8.0)
    for seed in range(6):
        with sim.configure(backend="sim", sim_seed=seed, sim_strategy="reverse"):
            a, c = sim.array(h), sim.array(np.full(8, 5.0))
            before = c.sum()                     # must read the 5s
            acp.add(a, 1.0, c)
            after = acp.multiply(c, 2.0)         # must read a + 1
            acp.subtract(a, a, c)                # must come after both
            assert float(before) == 40.0
            np.testing.assert_array_equal(after.numpy(), (h + 1.0) * 2.0)
            np.testing.assert_array_equal(c.numpy(), np.zeros(8))


IDX = np.array([3, 2, 0, 1])


@pytest.mark.parametrize("call,written", [
    (lambda a, b, c, d: acp.clip(a, 0.8, 1.2, c), "c"),
    (lambda a, b, c, d: acp.sum(a, 0, None, d), "d"),
    (lambda a, b, c, d: acp.take(a, acp.asarray(IDX), 1, c), "c"),
    (lambda a, b, c, d: acp.add.reduce(a, 0, None, d), "d"),
    (lambda a, b, c, d: acp.add.accumulate(a, 0, None, c), "c"),
    (lambda a, b, c, d: acp.add.at(d, acp.asarray(IDX), 1.0), "d"),
    (lambda a, b, c, d: acp.divmod(a, b, c, b), "bc"),
    (lambda a, b, c, d: a.sum(0, None, d), "d"),
    (lambda a, b, c, d: a.sort(), "a"),
    (lambda a, b, c, d: acp.copyto(dst=c, src=a), "c"),
    (lambda a, b, c, d: acp.nan_to_num(a, False), "a"),
    (lambda a, b, c, d: acp.median(a, overwrite_input=True), "a"),
    (lambda a, b, c, d: acp.percentile(a, 50, None, None, True), "a"),
    (lambda a, b, c, d: acp.nanmedian(a, 1, c[:, 0], True), "ac"),
    (lambda a, b, c, d: acp.median(a, overwrite_input=False), ""),
], ids=["clip", "sum", "take", "add.reduce", "add.accumulate", "add.at", "divmod",
        "ndarray.sum", "ndarray.sort", "copyto", "nan_to_num", "median", "percentile",
        "nanmedian", "median-copy"])
def test_outputs_reached_positionally_or_by_name_are_writes(sim, call, written):
    rng = np.random.default_rng(1)
    hosts = [rng.uniform(0.5, 1.5, (3, 4)) for _ in range(3)] + [rng.uniform(0.5, 1.5, 4)]
    arrays = [sim.array(h) for h in hosts]
    calls = []
    real = Runtime.launch_call

    def spy(self, c):
        calls.append(c)
        return real(self, c)

    Runtime.launch_call = spy
    try:
        call(*arrays)
    finally:
        Runtime.launch_call = real
    (library_call,) = [c for c in calls
                       if any(x._alloc is y._alloc for x in c.arrays for y in arrays)]
    booked = {acc.alloc for acc in library_call.accesses() if acc.write}
    for name, arr in zip("abcd", arrays):
        assert (arr._alloc in booked) == (name in written), name
    sim.synchronize()


def test_pure_calls_still_book_their_inputs_as_reads(sim):
    """Knowing purity matters: common calls must not serialize their readers."""
    s = sim.array(np.eye(3) * 2.0)
    a = sim.array(np.ones((3, 3)))
    with sim.instrument(Nodes()) as seen:
        acp.add(a, s)
        acp.sum(a, axis=0)
        acp.matmul(a, s)
        acp.linalg.solve(s, a)
        acp.fft.fft(a)
        acp.take(a, acp.asarray(np.array([0, 2])))
        a.sum(0)
        acp.add.reduce(a, 0)
        acp.clip(a, 0.0, 0.5)
        acp.nan_to_num(a)
        # (arrays through *args, which no signature places: they read them)
        acp.einsum("ij,jk->ik", a, a)
        acp.meshgrid(a[0], a[1])
        acp.broadcast_arrays(a, s)
        acp.atleast_2d(a)
    names = ["add", "sum", "matmul", "linalg.solve", "fft.fft", "take", "ndarray.sum",
             "add.reduce", "clip", "nan_to_num", "einsum", "meshgrid", "broadcast_arrays",
             "atleast_2d"]
    for name in names:
        booked = seen.writes(name, a)
        assert booked and not any(booked), name
    sim.synchronize()


# -- what the rule says where it cannot know ----------------------------------------------------
class _NoSignature:
    """A function whose signature Python cannot read (like some of CuPy's Cython ones)."""

    __signature__ = "unreadable"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return None


class _StandInUfunc:
    nin, nout = 1, 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return None


@pytest.fixture
def stand_in_cupy(monkeypatch):
    """``asyncgpu.runtime.effects`` sees this module as the ``cuda`` backend's CuPy."""
    fake = types.SimpleNamespace(
        clip=_NoSignature(), sum=lambda *args, **kwargs: None, sinc=_StandInUfunc(),
        scatter_add=lambda a, slices, value: None, copyto=lambda target, src: None,
        random=types.SimpleNamespace(Generator=types.SimpleNamespace()),
        ndarray=types.SimpleNamespace(get=lambda self, stream=None: None),
    )
    monkeypatch.setattr(array_modules, "backend_module", lambda b: fake if b == "cuda" else np)
    return fake


def _written(path: str, nargs: int, **kwargs: Any) -> Any:
    slots = tuple(f"arg{i}" for i in range(nargs))
    return set(_effects.effects("cuda", path, slots, kwargs).places(slots, kwargs))


def test_a_signature_cupy_hides_is_read_from_numpy(stand_in_cupy):
    assert _written("clip", 4) == {"arg3"}                    # NumPy's clip(a, lo, hi, out)
    assert _written("sum", 4) == {"arg3"}                     # a bare (*args, **kwargs) too
    assert _written("clip", 3, out="o") == {"o"}


def test_cupy_ufuncs_write_positions_from_nin(stand_in_cupy):
    assert _written("sinc", 2) == {"arg1"}                    # a ufunc in CuPy, not in NumPy


def test_calls_not_known_to_be_pure_write_every_array(stand_in_cupy):
    assert _written("scatter_add", 3) == {"arg0", "arg1", "arg2"}       # CuPy only
    assert _written("ndarray.get", 1) == {"arg0"}                       # CuPy only
    assert _written("random.Generator.not_numpy", 2) == {"arg0", "arg1"}
    assert _written("add.resolve_dtypes", 1) == {"arg0"}    # not one of the ufunc methods
    assert _written("copyto", 2) == {"arg0", "arg1"}      # CuPy names dst otherwise: no guess
    assert _written("clip", 6) == {f"arg{i}" for i in range(6)}     # binds to no signature


def test_unknown_call_on_sim_is_ordered_as_a_write(sim):
    """A call the runtime cannot know (here a dispatched path NumPy lacks) writes its arrays:
    what it does to them is published and ordered."""
    h = np.arange(4.0)
    x = sim.array(h)

    def double_in_place(a: np.ndarray) -> None:
        a *= 2.0

    with sim.instrument(Nodes()) as seen:
        _library.dispatch("not_a_numpy_function", (x,), {}, resolve=lambda b: double_in_place)
        y = x + 1.0
    assert seen.writes("not_a_numpy_function", x) == [True]
    np.testing.assert_array_equal(y.numpy(), h * 2.0 + 1.0)


# -- the sweep over the whole surface -------------------------------------------------------------
#: Not called: they touch files, the terminal or NumPy's global settings.
SIDE_EFFECTS = frozenset({
    "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
    "fromfile", "fromregex", "tofile", "dump", "dumps", "info", "show_config", "show_runtime",
    "test", "setbufsize", "seterr", "seterrcall", "set_printoptions", "printoptions",
    "get_printoptions", "set_string_function", "spawn", "bit_generator",
})
UFUNC_METHODS = ("reduce", "accumulate", "reduceat", "outer", "at")


class _Lit:
    """A literal (non-array) argument of a template."""

    def __init__(self, value: Any) -> None:
        self.value = value


L = _Lit
#: Argument templates: names of generated arrays and literals; a dict holds keywords.
TEMPLATES: list[tuple[Any, ...]] = [
    ("A",), ("v",), ("S",), ("A", "B"), ("A", "C"), ("v", "w"), ("S", "T"), ("S", "r"),
    ("A", "B", "C"), ("v", "w", "u"), ("A", "B", "C", "D"), ("S", "T", "U"),
    ("v", "i"), ("v", "i", "w"), ("v", "m", "w"), ("v", "m"), ("A", "M", "B"), ("A", "M"),
    ("A", "j", "B", L(1)), ("A", "j", L(1)), ("A", "j", "B"),
    ("A", L(0.8), L(1.2), "C"), ("A", L(0), L(None), "o4"), ("A", L(1), L(None), "r"),
    ("A", L(0), L(None), "C"), ("v", "k", L(0), L(None), "o2"), ("v", "i", L(0), "r"),
    ("v", "i", "r"), ("A", L(2.0)), ("v", L(2.0)), ("v", L(1)), ("v", L(True)),
    ("v", L(False)), ("A", L(1)), ("A", L(0), "o4"),
    ("A", {"out": "C"}), ("A", "B", {"out": "C"}), ("A", {"axis": L(0), "out": "o4"}),
    ("v", "w", {"out": "O"}), ("v", {"out": "w"}),
    (L(None), L(np.float64), "v"), (L(1.0), L(None), L(np.float64), "v"),
    (L(None), L(np.float64), L("zig"), "v"), ("v", L(None), L(-1), L(None), "z"),
]


def _arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def f(*shape: int) -> np.ndarray:
        return rng.uniform(0.5, 1.5, shape)

    return {
        "A": f(3, 4), "B": f(3, 4), "C": f(3, 4), "D": f(3, 4),
        "S": f(3, 3) + 3 * np.eye(3), "T": f(3, 3), "U": f(3, 3),
        "v": f(4), "w": f(4), "u": f(4), "r": f(3), "o4": f(4), "o2": f(2), "O": f(4, 4),
        "i": np.array([2, 0, 1]), "k": np.array([0, 2]),
        "j": np.array([[3, 1, 0, 2], [0, 0, 1, 1], [2, 3, 3, 0]]),
        "z": f(4) + 1j * f(4), "m": np.array([True, False, True, False]), "M": rng.random((3, 4)) < 0.5,
    }


ARRAYS = _arrays(np.random.default_rng(2))


def _instantiate(template: tuple[Any, ...], make: Any) -> tuple[list[Any], dict[str, Any],
                                                               dict[str, Any]]:
    """(positional, keyword arguments, name -> array) with each named array made by
    ``make(host)``: every occurrence of a name is the same array."""
    made: dict[str, Any] = {}

    def value(item: Any) -> Any:
        if isinstance(item, _Lit):
            return item.value
        if item not in made:
            made[item] = make(ARRAYS[item])
        return made[item]

    args, kwargs = [], {}
    for item in template:
        if isinstance(item, dict):
            kwargs = {k: value(v) for k, v in item.items()}
        else:
            args.append(value(item))
    return args, kwargs, made


def surface() -> list[tuple[str, Any, Any]]:
    """(path, the reference: args -> result, asyncgpu's) for every callable of the namespace.
    The reference is NumPy's callable, or what the simulator runs where it reads its arguments
    as CuPy's signature does (``argmax(a, axis, dtype, out)``, ``ndarray.all(axis, out)``).
    Methods take their object as the first argument, generator methods a fresh generator of a
    fixed seed."""
    entries = []
    for prefix, module in (("", np), ("linalg.", np.linalg), ("fft.", np.fft)):
        for name in dir(module):
            if name.startswith("_") or name in SIDE_EFFECTS:
                continue
            ref = getattr(module, name)
            if isinstance(ref, (type, types.ModuleType)) or not callable(ref):
                continue
            try:
                ours = getattr(acp, prefix + name) if not prefix else \
                    getattr(getattr(acp, prefix[:-1]), name)
            except AttributeError:
                continue
            if not isinstance(ours, acp.Function):      # metadata functions, asarray, ...
                continue
            entries.append((prefix + name, sim_function(prefix + name) or ref, ours))
            if isinstance(ref, np.ufunc):
                for method in UFUNC_METHODS:
                    entries.append((f"{prefix}{name}.{method}", getattr(ref, method),
                                    getattr(ours, method)))
    for name in dir(np.ndarray):
        if name.startswith("_") or name in SIDE_EFFECTS \
                or not callable(getattr(np.ndarray, name)):
            continue

        def ref_method(x: Any, *args: Any, _n: str = name, **kwargs: Any) -> Any:
            return getattr(x, _n)(*args, **kwargs)

        entries.append((f"ndarray.{name}", sim_function(f"ndarray.{name}") or ref_method,
                        ref_method))
    for name in dir(np.random.Generator):
        if name.startswith("_") or name in SIDE_EFFECTS:
            continue

        def ref_draw(*args: Any, _n: str = name, **kwargs: Any) -> Any:
            return getattr(np.random.default_rng(5), _n)(*args, **kwargs)

        def our_draw(*args: Any, _n: str = name, **kwargs: Any) -> Any:
            return getattr(acp.random.default_rng(5), _n)(*args, **kwargs)

        entries.append((f"random.Generator.{name}", ref_draw, our_draw))
    return entries


def _reference(fn: Any, template: tuple[Any, ...]) -> dict[str, np.ndarray] | None:
    """The argument arrays NumPy's call modifies (name -> their bytes after), or None if it
    fails or modifies nothing."""
    args, kwargs, made = _instantiate(template, np.copy)
    if not made:
        return None
    try:
        fn(*args, **kwargs)
    except Exception:
        return None
    changed = {k: a for k, a in made.items() if a.tobytes() != ARRAYS[k].tobytes()}
    return changed or None


def unbooked_writes(ag: Any, entries: list[tuple[str, Any, Any]],
                    checked: set[str] | None = None) -> list[str]:
    """One line per call that modified an argument array without booking it as a write or
    ended with other bytes than NumPy's run of the same call; the paths of the calls that
    modified an argument are added to ``checked``."""
    problems = []
    checked = set() if checked is None else checked
    calls: list[Any] = []
    real = Runtime.launch_call

    def spy(self: Any, call: Any) -> Any:
        calls.append(call)
        return real(self, call)

    Runtime.launch_call = spy
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for path, ref, ours in entries:
                for template in TEMPLATES:
                    changed = _reference(ref, template)
                    if changed is None:
                        continue
                    del calls[:]
                    problems += _check_ours(ag, path, ours, template, changed, calls)
                    checked.update(c.name for c in calls)
    finally:
        Runtime.launch_call = real
    return problems


def _check_ours(ag: Any, path: str, ours: Any, template: tuple[Any, ...],
                changed: dict[str, np.ndarray], calls: list[Any]) -> list[str]:
    args, kwargs, made = _instantiate(template, ag.array)
    where = f"{path}{tuple(t.value if isinstance(t, _Lit) else t for t in template)}"
    try:
        ours(*args, **kwargs)
        ag.synchronize()
        failed = None
    except Exception as exc:       # refused here (or a fault, checked below by the bookings)
        failed = exc
    if not calls:
        return []                  # not a library call (a host-side method): nothing booked
    booked = {acc.alloc for call in calls for acc in call.accesses() if acc.write}
    problems = [f"{where} modifies '{k}' but books it as a read" for k in changed
                if made[k]._alloc not in booked]
    if failed is None and not problems:
        for k, want in changed.items():
            if made[k].numpy().tobytes() != want.tobytes():
                problems.append(f"{where} leaves other bytes in '{k}' than NumPy")
    return problems


def test_every_array_a_call_of_the_namespace_modifies_is_booked_as_a_write(sim):
    entries = surface()
    paths = {p for p, _, _ in entries}
    # the sweep reaches every part of the surface
    assert {"multiply", "multiply.at", "linalg.solve", "fft.fft", "ndarray.sort",
            "random.Generator.shuffle"} <= paths
    checked: set[str] = set()
    problems = unbooked_writes(sim, entries, checked)
    assert not problems, "\n".join(problems)
    # calls that do write were run: positional and keyword outputs, in-place functions,
    # ufunc methods, methods and generator draws
    assert {"multiply", "divmod", "clip", "sum", "put_along_axis", "copyto", "place",
            "add.at", "add.accumulate", "ndarray.sort", "ndarray.fill", "ndarray.partition",
            "random.Generator.random"} <= checked, checked


# -- mutants: the tests above notice a rule that forgets a write ---------------------------------
def _forget_positional_ufunc_outputs(real: Any) -> Any:
    def mutant(module: Any, path: str, nargs: int, keywords: tuple[str, ...]) -> Any:
        plan = real(module, path, nargs, keywords)
        if isinstance(_effects._lookup(np, path.split(".")), np.ufunc):
            return _effects.Effects(frozenset(), plan.keywords, plan.everything,
                                    plan.conditional)
        return plan
    return mutant


def _forget_in_place_functions(real: Any) -> Any:
    def mutant(module: Any, path: str, nargs: int, keywords: tuple[str, ...]) -> Any:
        saved = dict(_effects.IN_PLACE)
        _effects.IN_PLACE.clear()
        try:
            return real(module, path, nargs, keywords)
        finally:
            _effects.IN_PLACE.update(saved)
    return mutant


@pytest.mark.parametrize("mutant,paths,program", [
    (_forget_positional_ufunc_outputs, {"multiply", "divmod"},
     test_positional_ufunc_output_is_written_and_read_back),
    (_forget_in_place_functions, {"put_along_axis", "copyto", "ndarray.sort"},
     test_put_along_axis_writes_its_array),
], ids=["positional-ufunc-outputs", "in-place-functions"])
def test_a_rule_that_forgets_a_write_is_caught(sim, monkeypatch, mutant, paths, program):
    """Applied by monkeypatch (never a switch of the library): the sweep names the functions
    whose write went unbooked and the reported program fails."""
    monkeypatch.setattr(_effects, "_derive", mutant(_effects._derive))
    monkeypatch.setattr(_effects, "_plans", {})          # nothing derived by the real rule
    monkeypatch.setattr(_result_meta, "_meta_cache", {})
    entries = [e for e in surface() if e[0] in paths]
    problems = unbooked_writes(sim, entries)
    for path in paths:
        assert any(p.startswith(f"{path}(") for p in problems), (path, problems)
    with pytest.raises((AssertionError, sim.AsyncGPUError)):
        program(sim)
    for _ in range(8):               # the faults the mutant caused are reported one sync each
        try:
            sim.synchronize()
            break
        except sim.KernelFault:
            pass


def test_a_rule_that_books_every_array_as_written_is_caught(sim, monkeypatch):
    """Correct but serial: the purity the rule knows is checked too."""
    monkeypatch.setattr(_effects, "_derive", lambda *args: _effects.EVERYTHING)
    monkeypatch.setattr(_effects, "_plans", {})
    with pytest.raises(AssertionError):
        test_pure_calls_still_book_their_inputs_as_reads(sim)


def test_in_place_methods_the_simulator_runs_as_cupys_book_their_array_alone(sim):
    """The simulator's own function for a method names its array otherwise than ``self``:
    every array argument was booked written (and a fill no longer cleared fault marks)."""
    slot = object()
    for path, args in [("ndarray.fill", (slot, 1.0)), ("ndarray.put", (slot, slot, slot)),
                       ("ndarray.__setitem__", (slot, slot, 1.0))]:
        found = _effects.effects("sim", path, args, {})
        assert not found.everything and found.positions == {0}, path
