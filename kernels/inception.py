"""INCEPTION kernels: a same-padded KxK convolution with bias and ReLU, and 3x3 max pooling.

Activations are flat float32 arrays in channel-major order (``[C, H, W]``, batch 1): a branch
writes a contiguous channel range of its block's output, so the four branches of a block write
disjoint byte ranges of one allocation (the concatenation costs nothing and orders nothing).
One thread per output element, grid-stride loops.
"""

from numba import cuda, float32


@cuda.jit
def conv_relu(inp, w, bias, out, cin, h, wd, k, cout):
    """``relu(bias[co] + sum over ci, ky, kx of inp[ci, y+ky-p, x+kx-p] w[co, ci, ky, kx])``
    at each output ``(co, y, x)`` (``p = k // 2``: same padding)."""
    p = k // 2
    plane = h * wd
    for i in range(cuda.grid(1), cout * plane, cuda.gridsize(1)):
        co = i // plane
        r = i - co * plane
        y = r // wd
        x = r - y * wd
        acc = float32(bias[co])
        for ci in range(cin):
            for ky in range(k):
                yy = y + ky - p
                if yy >= 0 and yy < h:
                    for kx in range(k):
                        xx = x + kx - p
                        if xx >= 0 and xx < wd:
                            wi = ((co * cin + ci) * k + ky) * k + kx
                            acc += inp[(ci * h + yy) * wd + xx] * w[wi]
        out[i] = acc if acc > 0 else float32(0)


@cuda.jit
def maxpool3(inp, out, c, h, wd):
    """out[c, y, x] = max of inp[c] over the 3x3 window at (y, x) (same padding)."""
    plane = h * wd
    for i in range(cuda.grid(1), c * plane, cuda.gridsize(1)):
        ch = i // plane
        r = i - ch * plane
        y = r // wd
        x = r - y * wd
        m = inp[i]
        for yy in range(max(y - 1, 0), min(y + 2, h)):
            for xx in range(max(x - 1, 0), min(x + 2, wd)):
                v = inp[(ch * h + yy) * wd + xx]
                if v > m:
                    m = v
        out[i] = m


ANNOTATIONS = {
    "conv_relu": {"const": ["inp", "w", "bias"], "out": ["out"]},
    "maxpool3": {"const": ["inp"], "out": ["out"]},
}
