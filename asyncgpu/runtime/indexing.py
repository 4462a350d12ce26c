"""Advanced indexing of :class:`asyncgpu.Array`: integer arrays, boolean masks and lists as nodes.

``x[key]`` where ``key`` holds an array or a list (alone, or mixed with integers, slices, ``None``
and ``...``) returns a new :class:`~asyncgpu.Array`, as CuPy returns a device array:

* an integer ``Array`` index is a gather node (``ndarray.__getitem__``): the result's shape follows
  from the shapes alone, so nothing waits. Its values are not known before the node runs: an
  out-of-range value wraps around, on both backends (CuPy's rule for device indices); from an
  array with no elements, a gather of any element is an ``IndexError`` at the call, as CuPy's.
* a NumPy integer array or a list is host data: it is checked against its axis at once (an
  ``IndexError`` before anything is enqueued) and copied to the device, as CuPy does, then
  gathered by the same node.
* a boolean mask stands for its ``nonzero()`` indices, as NumPy defines it. A host mask's are
  computed on the host (no wait); a device mask's by ``nonzero``, the library's synchronizing call
  (the result's length depends on the mask's values): the host waits for the mask's writers only.
  A boolean scalar (``x[True]``) adds an axis of length 1 or 0, as in NumPy.

``x[key] = value`` with an advanced key, or with an ``Array`` value, is one node
(``ndarray.__setitem__``, which writes ``x`` like any in-place method); a host mask needs no wait
there, a device mask is counted by the library to shape the value (CuPy reads the count to the
host: the call waits for the mask's writers, ``LibraryCall.data_dependent``, and a value of
another length is a ``ValueError`` at the call on both backends). Everything that can be
checked on the host (too many indices, a mask whose shape does not match, a host index out of
range, index arrays that do not broadcast, a value that does not broadcast) raises
``IndexError`` / ``ValueError`` before anything is enqueued.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .array import Array, host_array
from .library import dispatch
from .node_ops import ops

_INTEGER_KINDS = "iu"


def _is_array_like(k: Any) -> bool:
    return isinstance(k, (list, np.ndarray, Array))


def _is_bool_scalar(k: Any) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return True
    return isinstance(k, (np.ndarray, Array)) and k.ndim == 0 and k.dtype.kind == "b"


def _consumed(k: Any) -> int:
    """How many axes of the indexed array one component of a key indexes."""
    if k is None or k is Ellipsis or _is_bool_scalar(k):
        return 0
    if isinstance(k, (np.ndarray, Array)) and k.dtype.kind == "b":
        return k.ndim
    if isinstance(k, list):
        host = np.asarray(k)
        return host.ndim if host.dtype.kind == "b" else 1
    return 1


def _host_index(k: Any) -> np.ndarray:
    """A list or NumPy array used as an index, as a NumPy array NumPy would accept."""
    host = np.asarray(k)
    if host.size == 0 and host.dtype.kind not in "biu":
        return host.astype(np.intp)     # ``x[[]]``: an empty integer index, as in NumPy
    if host.dtype.kind not in "biu":
        raise IndexError("arrays used as indices must be of integer (or boolean) type; got a "
                         f"{host.dtype.name} array")
    return host


def _check_mask(mask: Any, shape: tuple[int, ...], axis: int) -> None:
    for i, m in enumerate(mask.shape):
        n = shape[axis + i]
        if m != n:
            raise IndexError(
                f"boolean index did not match indexed array along axis {axis + i}; size of axis "
                f"is {n} but size of corresponding boolean axis is {m}"
            )


def _check_bounds(index: np.ndarray, n: int, axis: int) -> None:
    if index.size and (index.min() < -n or index.max() >= n):
        bad = index[(index < -n) | (index >= n)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")


def parse(x: Array, key: Any) -> tuple[Array, list[Any]]:
    """``(array, components)`` of an advanced key: one component per indexed axis (``...``
    spelled out as slices), each an int (in range), a slice, ``None``, a device Array (integer
    or boolean, masks matching their axes) or a NumPy array (integer in range, or a matching
    boolean mask). A boolean scalar becomes an index of a length-1 axis inserted into the array
    (a view), which is what NumPy's rule for it amounts to. Raises before anything is enqueued.
    """
    comps = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for k in comps if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    for k in comps:
        if isinstance(k, Array):
            k._check_alive()
    consumed = sum(_consumed(k) for k in comps)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but "
                         f"{consumed} were indexed")
    shape, strides = list(x.shape), list(x.strides)
    out: list[Any] = []
    axis = 0
    for k in comps:
        if k is Ellipsis:
            fill = x.ndim - consumed
            out.extend([slice(None)] * fill)
            axis += fill
        elif k is None or isinstance(k, slice):
            out.append(k)
            axis += 0 if k is None else 1
        elif _is_bool_scalar(k):
            # NumPy: a new axis of length 1, indexed by the scalar's nonzero() (one index or none)
            shape.insert(axis, 1)
            strides.insert(axis, 0)
            out.append(np.zeros(1 if bool(k) else 0, np.intp))
            axis += 1
        elif isinstance(k, Array):
            if k.dtype.kind == "b":
                _check_mask(k, tuple(shape), axis)
                axis += k.ndim
            elif k.dtype.kind in _INTEGER_KINDS:
                axis += 1
            else:
                raise IndexError("arrays used as indices must be of integer (or boolean) type; "
                                 f"got {k.describe()}")
            out.append(k)
        elif _is_array_like(k) or isinstance(k, tuple):
            host = _host_index(k)
            if host.dtype.kind == "b":
                _check_mask(host, tuple(shape), axis)
                axis += host.ndim
            else:
                _check_bounds(host, shape[axis], axis)
                axis += 1
            out.append(host)
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(
                    f"only integers, slices, ..., None and arrays are valid indices; got {k!r}"
                ) from None
            n = shape[axis]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            out.append(i)
            axis += 1
    if tuple(shape) != x.shape:
        x = Array._view(x._alloc, tuple(shape), x.dtype, tuple(strides), x._offset)
    return x, out


def result_shape(shape: tuple[int, ...], comps: list[Any]) -> tuple[int, ...]:
    """The shape of ``x[comps]`` (no boolean components) by NumPy's rule: the index arrays and
    integers broadcast together; their shape replaces their axes where they are adjacent, and
    comes first where a slice or ``None`` separates them."""
    dims: list[int] = []
    where: list[int] = []
    index_shapes: list[tuple[int, ...]] = []
    axis = 0
    for k in comps:
        if k is None:
            dims.append(1)
        elif isinstance(k, slice):
            dims.append(len(range(*k.indices(shape[axis]))))
            axis += 1
        else:
            where.append(len(dims))
            index_shapes.append(() if isinstance(k, int) else tuple(k.shape))
            axis += 1
    dims.extend(shape[axis:])
    try:
        broadcast = np.broadcast_shapes(*index_shapes)
    except ValueError:
        raise IndexError(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            + " ".join(str(s) for s in index_shapes)
        ) from None
    # (no index array at all: a basic key, here for an assignment of an Array value)
    at = where[0] if where and all(w == where[0] for w in where) else 0
    return tuple(dims[:at]) + tuple(broadcast) + tuple(dims[at:])


def _upload(k: Any) -> Any:
    """A host index array as a device Array (a host write into a fresh array, as CuPy copies
    NumPy indices to the device); other components as they are."""
    if isinstance(k, np.ndarray):
        return host_array(k)
    return k


def _shaped(shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """The placeholder run of a gather on ``sim``: its result's shape and dtype, known from the
    shapes alone (the placeholders' random index values could be out of range)."""
    def run(*args: Any, **kwargs: Any) -> np.ndarray:
        return np.broadcast_to(np.empty((), dtype), shape)
    return run


def getitem(x: Array, key: Any) -> Array:
    """``x[key]`` for an advanced key: a new Array computed by a gather node."""
    x, comps = parse(x, key)
    expanded: list[Any] = []
    for k in comps:
        if isinstance(k, np.ndarray) and k.dtype.kind == "b":
            expanded.extend(np.nonzero(k))           # host data: no wait
        elif isinstance(k, Array) and k.dtype.kind == "b":
            expanded.extend(dispatch("nonzero", (k,), {}))    # synchronizing
        else:
            expanded.append(k)
    shape = result_shape(x.shape, expanded)
    if x.size == 0 and 0 not in shape:
        # (CuPy's gather refuses at the call: no index of an empty axis is in range or wraps)
        raise IndexError("cannot do a non-empty take from an empty axes.")
    index = tuple(_upload(k) for k in expanded)
    return dispatch("ndarray.__getitem__", (x, index), {},
                    inference=lambda: _shaped(shape, x.dtype))


def _assigned(x: Any, index: Any, value: Any) -> None:
    """The placeholder run of an assignment on ``sim``: no result (the placeholders' random
    index values could be out of range, and the checks were made on the host)."""
    return None


def _check_value(value: Any, target: tuple[int, ...]) -> None:
    """A value must broadcast to the shape it is assigned to (leading length-1 axes of a value
    with more axes are dropped, as NumPy does)."""
    vshape = tuple(np.shape(value)) if not isinstance(value, Array) else value.shape
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        ok = np.broadcast_shapes(vshape, target) == target
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"shape mismatch: value array of shape {vshape} could not be "
                         f"broadcast to indexing result of shape {target}")


def setitem(x: Array, key: Any, value: Any) -> None:
    """``x[key] = value`` as a node writing ``x`` (advanced key, or an Array value)."""
    if isinstance(value, Array):
        value._check_alive()
    elif isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim):
        value = _upload(np.asarray(value))
    x, comps = parse(x, key)
    # A host mask stands for its nonzero() indices (NumPy's definition), uploaded as integer
    # arrays: the library then needs not count it on the host, as it counts a device mask
    # (the upload is 8 bytes an axis for each true element, where the mask is 1 for each).
    comps = [e for k in comps for e in
             (np.nonzero(k) if isinstance(k, np.ndarray) and k.dtype.kind == "b" and k.ndim
              else (k,))]
    if not any(isinstance(k, Array) and k.dtype.kind == "b" for k in comps):
        # (a device mask's length is not known here: the library checks it at the call)
        _check_value(value, result_shape(x.shape, comps))
    index = tuple(_upload(k) for k in comps)
    # ``ndarray.__setitem__`` writes its ``self`` (``asyncgpu.runtime.effects``): x is the
    # node's write
    dispatch("ndarray.__setitem__", (x, index, value), {}, inference=lambda: _assigned)


def flat_index(key: Array, size: int) -> Array:
    """A device index of ``a.flat``: an integer Array as it is, a boolean one (of ``size``
    elements) as its ``flatnonzero`` indices (synchronizing, as for a mask)."""
    if key.dtype.kind == "b":
        if key.size != size:
            raise IndexError(f"boolean index did not match indexed flat array of size {size}; "
                             f"got {key.describe()}")
        return dispatch("flatnonzero", (key,), {})
    if key.dtype.kind not in _INTEGER_KINDS:
        raise IndexError("arrays used as indices must be of integer (or boolean) type; got "
                         f"{key.describe()}")
    return key


ops.getitem = getitem
ops.setitem = setitem
ops.flat_index = flat_index
