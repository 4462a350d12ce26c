"""K-means clustering, ported from CuPy's examples.

Origin: repository ``cupy/cupy``, ``examples/kmeans/kmeans.py`` (class ``KMeans``, method
``fit``; the data as in ``examples/kmeans/kmeans_train.py``: Gaussian blobs). The GPU branch of
``fit`` computes the new centers with a ``cupy.ElementwiseKernel`` of ``atomicAdd``s; here it
is the same CUDA C through ``ag.cuda_kernel``, with a NumPy twin for the simulator. The plotting
method ``draw`` is left out (it needs matplotlib and writes a file).
"""

from __future__ import annotations

import numpy as np

import asyncgpu as ag  # asyncgpu: the runtime (for the CUDA C kernel)
import asyncgpu.cupy as acp  # asyncgpu: the scheduled CuPy namespace replaces ``import cupy``

SIZES = {"sim": (256, 3, 2), "gpu": (200_000, 4, 2)}   # (points, clusters, dimensions)
# The centers are sums of floating-point numbers: on the GPU the atomicAdds land in any order.
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 0.0},
             "gpu": {"rtol": 1e-9, "atol": 1e-9, "pred": {"rtol": 0.0, "atol": 0.0}}}

# asyncgpu: the ElementwiseKernel ('S data, T label', 'raw U centers, raw U group') written as
# a CUDA C kernel: ElementwiseKernel's implicit index ``i`` over the (n, d) data and its
# broadcasting of the (n, 1) labels become explicit, and the center's column is ``i % d`` (the
# original writes ``i % 30000``).
_CALC_CENTER = r'''
extern "C" __global__ void calc_center(const double* data, const long long* label,
                                       double* centers, double* group, int n, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * d) {
        long long l = label[i / d];
        atomicAdd(&centers[l * d + i % d], data[i]);
        atomicAdd(&group[l], 1.0);
    }
}
'''


def _calc_center_twin(data, label, centers, group, n, d):
    # the simulator's version of the launch: the same sums, with NumPy's unbuffered add.at
    # (the twin gets the arrays with the shapes they were passed with: flatten them as the
    # pointers do)
    rows = np.repeat(label.reshape(-1)[:n], d)
    centers = centers.reshape(-1, d)
    np.add.at(centers, (rows, np.tile(np.arange(d), n)), data.reshape(-1)[:n * d])
    np.add.at(group, rows, 1.0)


calc_center = ag.cuda_kernel(_CALC_CENTER, "calc_center", sim=_calc_center_twin)  # asyncgpu


class KMeans(object):
    def __init__(self, n_clusters=2, max_iter=10):
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.centers = None
        self.xp = None
        self.pred = None

    def fit(self, X, seed=0):  # asyncgpu: the shuffle's seed is a parameter (see below)
        self.xp = acp.get_array_module(X)  # asyncgpu: acp for cupy
        self.pred = self.xp.zeros(len(X))
        X_indexes = np.arange(len(X))
        # asyncgpu: a seeded generator instead of np.random's global state, so that the NumPy
        # reference starts from the same initial centroids
        np.random.default_rng(seed).shuffle(X_indexes)
        initial_centroid_indexes = X_indexes[:self.n_clusters]
        self.centers = X[initial_centroid_indexes]
        data_num = X.shape[0]
        data_dim = X.shape[1]

        for _ in range(self.max_iter):
            # calculate distances and label
            X2 = X.repeat(self.n_clusters, axis=0)
            X2 = X2.reshape(data_num, self.n_clusters, data_dim)
            centers = self.xp.broadcast_to(self.centers,
                                           (data_num, self.n_clusters,
                                            data_dim))
            new_pred = self.xp.argmin(self.xp.sum((X2 - centers) ** 2,
                                                  axis=2), axis=1)

            if self.xp.all(new_pred == self.pred):
                break
            self.pred = new_pred

            # calculate centers (asyncgpu: the NumPy branch of the original is the reference
            # below; this is its GPU branch)
            centers = self.xp.zeros((self.n_clusters, data_dim),
                                    dtype=self.xp.float64)
            group = self.xp.zeros(self.n_clusters, dtype=self.xp.float64)
            label = self.xp.expand_dims(self.pred, axis=1)
            n_elements = data_num * data_dim  # asyncgpu: the launch's extent
            calc_center[(n_elements + 255) // 256, 256](  # asyncgpu: a launch
                X, label, centers, group, data_num, data_dim)
            group /= data_dim
            centers /= self.xp.expand_dims(group, axis=1)

            self.centers = centers


def _data(size):
    # the blobs of kmeans_train.py: Gaussian clusters around well separated centers
    n, k, d = size
    rng = np.random.default_rng(1234)
    means = rng.uniform(-10, 10, size=(k, d))
    which = rng.integers(0, k, size=n)
    return means[which] + rng.standard_normal((n, d))


def run(size):
    n, k, d = size
    X = acp.asarray(_data(size))
    model = KMeans(n_clusters=k, max_iter=10)
    model.fit(X)
    return {"centers": model.centers.get(), "pred": model.pred.get()}


def reference(size, got=None):
    # Lloyd's algorithm in NumPy, as the original's NumPy branch (vstack of the cluster means)
    n, k, d = size
    X = _data(size)
    order = np.arange(n)
    np.random.default_rng(0).shuffle(order)
    centers = X[order[:k]]
    pred = np.zeros(n)
    for _ in range(10):
        dist = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
        new_pred = dist.argmin(axis=1)
        if np.all(new_pred == pred):
            break
        pred = new_pred
        centers = np.stack([X[pred == i].mean(axis=0) for i in range(k)])
    return {"centers": centers, "pred": pred}
