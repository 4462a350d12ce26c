"""Library calls inside a recording: which ones are captured into the graph, and how.

The model
---------
A library call (``asyncgpu.cupy``, ``Array`` operators) inside a recording is *captured* like
a kernel launch when it is on the allow-list :data:`CAPTURABLE` and has one array result (or
an ``out=`` the caller gave): elementwise ufuncs and reductions. Their kernels go to the
stream CuPy is told to use, so stream capture records them (``matmul``/``dot`` are not on the
list: CuPy 14 refuses cuBLAS calls during stream capture, seen on the H100). What must not
happen during a capture is CuPy allocating the *result* from its pool (the graph would write,
at every replay, memory the pool hands out again). So:

* at record time the result's shape and dtype come from NumPy on placeholder data (as on
  ``sim``, ``asyncgpu.runtime.result_meta.infer``), the result array is allocated by the
  recorder and the call is deferred as ``fn(*args, **kwargs, out=result)``: it allocates nothing;
* the result arrays are *the same arrays at every run* of the recording (kept per recording,
  call position and arguments, like a kernel's output arrays), so the second run's sequence
  equals the first and the graph is captured and replayed;
* temporaries CuPy still allocates inside the call (a reduction's scratch) come from the
  runtime's pool and are *pinned* by the captured node until the graph is destroyed.

Every other call (``sort``, ``linalg.*``, ``fft.*``, data-dependent shapes, several results...)
ends the recording as before: the launches so far are issued eagerly and the rest of the body
runs eagerly, with a warning naming the call and why (with ``split=True`` it ends a segment).

Example::

    @ag.graph
    def step(x, y):
        r = acp.sqrt(x)          # captured: r is the same array at every call
        k[g, b](r, y)
        return r

Plain Python: the backends run the calls (``backend.library_call``).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

from ..core.deps import Access
from ..runtime.call_args import fill
from ..runtime.library import LibraryCall, allocate_results, function_resolver
from ..runtime.result_meta import NewResult, Synchronizing, ViewResult, call_key, infer
from .keys import issue_recorded

_UFUNCS = frozenset({
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder", "mod",
    "power", "negative", "positive", "absolute", "abs", "sqrt", "square", "cbrt", "exp",
    "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "arctan2", "sinh", "cosh", "tanh", "hypot", "maximum", "minimum", "fmax", "fmin",
    "sign", "floor", "ceil", "trunc", "rint", "reciprocal", "copysign", "greater",
    "greater_equal", "less", "less_equal", "equal", "not_equal", "logical_and", "logical_or",
    "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
    "left_shift", "right_shift", "isnan", "isinf", "isfinite",
})
_REDUCTIONS = frozenset({"sum", "prod", "max", "min", "amax", "amin", "mean", "argmax",
                         "argmin", "all", "any"})
#: Library calls captured into graphs (elementwise ufuncs and reductions; the ``ndarray.``
#: forms are the ``Array`` methods). Not matrix products: CuPy raises "calling cuBLAS API
#: during stream capture is currently unsupported", so they end the segment or run eagerly.
CAPTURABLE = _UFUNCS | _REDUCTIONS | {f"ndarray.{r}" for r in _REDUCTIONS}
#: Captured calls whose results are remembered, per runtime (least recently used first out).
RESULTS_KEPT = 4096
#: Result arrays remembered per captured call (its recording segment and position): those of
#: its latest argument sets, least recently used dropped first; an argument set whose arrays
#: are gone can never come again, and its result is dropped at the call's next run.
RESULTS_PER_CALL = 8


class CallLaunch:
    """One deferred library call of a recording (the counterpart of a kernel ``_Launch``)."""

    __slots__ = ("name", "args", "kwargs", "arrays", "site", "key", "launcher", "pin", "tenant")

    def __init__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                 site: str | None) -> None:
        self.name = name
        self.args, self.kwargs = args, kwargs         # the caller's, with out= the result
        self.site = site
        self.launcher = None                          # not a kernel
        self.pin = -1                                 # as ``Launch.pin``
        self.tenant = 0                               # as ``Launch.tenant``
        call = self.call()
        self.arrays: list[Access] = call.accesses()
        sig = _signature(call)
        if sig is None:
            raise TypeError("unhashable arguments")
        self.key = ("call", sig)

    def call(self) -> LibraryCall:
        """A fresh :class:`LibraryCall` of it (a call object is used for one issue)."""
        return LibraryCall(self.name, function_resolver(self.name), self.args, self.kwargs)

    def issue(self, rt: Any) -> None:
        """Issue it eagerly (a node of the dynamic DAG, writing the recorded result)."""
        issue_recorded(rt, self, rt.launch_call, self.call())


def _signature(call: LibraryCall) -> Any:
    arrays = tuple((a._alloc.id, a._lo, a._hi, a.shape, a.strides, a.dtype.str)
                   for a in call.arrays)
    key = (call.name, call_key(call.args), call_key(call.kwargs), arrays)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def why_not(call: LibraryCall) -> str | None:
    """Why ``call`` cannot be captured, or None when it can."""
    if call.name in ("matmul", "dot"):
        return "CuPy cannot call cuBLAS during a stream capture"
    if call.name not in CAPTURABLE:
        return "it is not on the capture allow-list (elementwise ufuncs and reductions)"
    if call.state:
        return "it draws random numbers from a generator's state"
    return None


def defer(recording: Any, call: LibraryCall, site: str | None,
          ) -> tuple[CallLaunch | None, Any, str]:
    """(the deferred launch of ``call``, its result, "") with the result allocated or kept
    from an earlier run of the recording; or (None, None, why it cannot be captured)."""
    reason = why_not(call)
    if reason is not None:
        return None, None, reason
    rt = recording.runtime
    try:
        meta = infer(call, function_resolver(call.name)("sim"))
    except Synchronizing:
        return None, None, "its result's shape depends on the data"
    args, kwargs = _user_args(call)
    out = kwargs.get("out")
    # (out=None, as NumPy passes it on, or a ufunc's out=(None,), asks for a result)
    if out is not None and not (type(out) is tuple and all(o is None for o in out)):
        if not isinstance(meta, ViewResult):
            return None, None, "its result is not its out= array"
        result = allocate_results(rt, call, meta, [])
        return _launch(call.name, args, kwargs, site, result)
    if not isinstance(meta, NewResult):
        return None, None, "its result is not one new array"
    sig = _signature(call)
    if sig is None:
        return None, None, "its arguments cannot be keyed"
    # (and by the launches deferred before it: the recorded function's other arguments, which
    # the same operands may hold other values of; its result is the same array only at the
    # calls that launch the same work before it)
    sig = (sig, tuple([launch.key for launch in recording.launches]))
    from .cache import graph_cache

    cache = graph_cache(rt)
    place = ((recording.token, recording.segment), recording.calls)
    kept = cache.results.get(place)
    if kept is None:
        kept = cache.results[place] = OrderedDict()
        if len(cache.results) > RESULTS_KEPT:
            cache.results.popitem(last=False)
    else:
        cache.results.move_to_end(place)
        # (a new batch each call: the earlier batches' results would otherwise stay alive)
        for gone in [old for old, (_, inputs) in kept.items() if not _alive(inputs)]:
            del kept[gone]
    hit = kept.get(sig)
    if hit is None or hit[0]._alloc.freed:
        # (a result the program freed is not handed out again: a new one, recorded anew)
        result = allocate_results(rt, call, meta, [])
        # (the arrays of the launches before it too: an argument set whose arrays are gone can
        # never come again)
        used = [a._alloc for a in call.arrays]
        used += [a.alloc for launch in recording.launches for a in launch.arrays]
        kept[sig] = (result, tuple({id(a): weakref.ref(a) for a in used}.values()))
        if len(kept) > RESULTS_PER_CALL:
            kept.popitem(last=False)
    else:
        result = hit[0]
        kept.move_to_end(sig)
    return _launch(call.name, args, dict(kwargs, out=result), site, result)


def _alive(inputs: tuple[Any, ...]) -> bool:
    """Whether every allocation of these weak references is still in use."""
    for ref in inputs:
        alloc = ref()
        if alloc is None or alloc.freed:
            return False
    return True


def _launch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], site: str | None,
            result: Any) -> tuple[CallLaunch | None, Any, str]:
    try:
        return CallLaunch(name, args, kwargs, site), result, ""
    except TypeError:
        return None, None, "its arguments cannot be keyed"


def _user_args(call: LibraryCall) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with the arrays put back in their slots."""
    return fill(call.args, call.arrays), fill(call.kwargs, call.arrays)


__all__ = ["CAPTURABLE", "CallLaunch", "defer", "why_not"]
