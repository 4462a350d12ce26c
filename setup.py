"""Build hook: compile asyncgpu's launch path with Cython; everything else is declared in
pyproject.toml.

The modules in :data:`HOT_MODULES` are plain Python that Cython compiles unchanged (pure-Python
mode), with the C types of their hot classes declared in the ``.pxd`` file beside each. Where
they cannot be compiled (no C compiler, no Python headers, no Cython) the install goes on and
asyncgpu runs the same files as Python; the build then writes one line naming the reason, and
asyncgpu logs one line when a runtime starts (``asyncgpu.core.compiled``).

``ASYNCGPU_BUILD=required`` (the project's CI) turns a failed compile into a failed install;
``ASYNCGPU_BUILD=python`` skips compiling.

In a source tree, ``python3 setup.py build_ext --inplace`` compiles the modules beside their
``.py`` files (the GPU machine runs the package from the tree that way).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: The launch path, compiled as whole modules: the backend interface, dependency tracking,
#: nodes, streams and their
#: policies, device placement, counters, allocations and array fields, binding and launching,
#: issuing, memory booking, the element-wise launches' chunks, frozen graphs, the recording
#: hook, tenants' bookkeeping, the recorder's recording, entry and keys, the backends'
#: graph-launch checks, the CUDA backend's launches and CUDA calls, and its routing over
#: several devices.
HOT_MODULES = (
    "asyncgpu.core.backend", "asyncgpu.core.dag", "asyncgpu.core.deps", "asyncgpu.core.policies",
    "asyncgpu.core.statistics", "asyncgpu.core.streams", "asyncgpu.core.placement",
    "asyncgpu.core.interference", "asyncgpu.core.tenants",
    "asyncgpu.runtime.allocation", "asyncgpu.runtime.kernel", "asyncgpu.runtime.issue",
    "asyncgpu.runtime.memory", "asyncgpu.runtime.frozen", "asyncgpu.runtime.context",
    "asyncgpu.runtime.host_access", "asyncgpu.runtime.recording_hook",
    "asyncgpu.runtime.chunks", "asyncgpu.runtime.tenant_steps",
    "asyncgpu.recorder.recording", "asyncgpu.recorder.entry", "asyncgpu.recorder.keys",
    "asyncgpu.recorder.finish",
    "asyncgpu.backends.capture", "asyncgpu.backends.cuda.calls",
    "asyncgpu.backends.cuda.kernels", "asyncgpu.backends.cuda.backend",
    "asyncgpu.backends.cuda.packed", "asyncgpu.backends.cuda.multi",
)
#: Compiled-only modules (``.pyx``): the CUDA driver calls, through cuda-python's Cython
#: bindings; built only where those bindings are installed.
DRIVER_MODULE = "asyncgpu.backends.cuda.cudriver"
#: The generated C is about 1 MB a module: at -O2 without debug information it compiles in
#: about two thirds of the time Python's default flags (-O3 -g) take. On Linux, -fno-plt calls
#: Python's C API through the global offset table rather than a stub per function and module:
#: a step that runs a path once, its caches cold, fetches 3-5% fewer lines of machine code
#: (docs/performance.md).
COMPILE_ARGS = ([] if os.name == "nt" else
                ["-O2", "-g0"] + (["-fno-plt"] if sys.platform.startswith("linux") else []))
DIRECTIVES = {
    "language_level": 3,
    # The annotations are for readers and type checkers; C types come from the .pxd files only,
    # so an annotation never narrows what a function accepts.
    "annotation_typing": False,
    "binding": True,
    "embedsignature": True,
}

MODE = os.environ.get("ASYNCGPU_BUILD", "optional").strip().lower() or "optional"


def _say(text: str) -> None:
    sys.stderr.write(f"asyncgpu: {text}\n")
    sys.stderr.flush()


def _cuda_include_dirs() -> list[str]:
    """Where ``cuda.h`` is, for cuda-bindings' ``cydriver.pxd``: the toolkit first (it also has
    ``cudaProfiler.h``, which older ``cydriver.pxd`` files include), then the headers of the
    ``nvidia-cuda-runtime`` wheel."""
    found = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "include", "cuda.h")):
            found.append(os.path.join(root, "include"))
    try:
        from cuda import pathfinder

        wheel = pathfinder.find_nvidia_header_directory("cudart")
        if wheel:
            found.append(wheel)
    except Exception:  # noqa: BLE001 - (no pathfinder, or no such wheel)
        pass
    return list(dict.fromkeys(found))


def _extensions() -> list[Extension]:
    if MODE == "python":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if MODE == "required":
            raise
        _say("Cython is not installed; the launch path will run as plain Python")
        return []
    root = os.path.dirname(os.path.abspath(__file__))
    options = dict(compiler_directives=DIRECTIVES, quiet=True, nthreads=os.cpu_count() or 1,
                   build_dir=os.path.join(root, "build", "cython"))
    try:
        modules = cythonize([Extension(name, [name.replace(".", "/") + ".py"],
                                       extra_compile_args=COMPILE_ARGS)
                             for name in HOT_MODULES], **options)
    except Exception as exc:  # noqa: BLE001 - Cython refused a module: run them all as Python
        if MODE == "required":
            raise
        _say(f"Cython could not translate the launch path ({exc}); it will run as plain Python")
        return []
    try:
        import cuda.bindings  # noqa: F401 - its cydriver.pxd is what the driver module cimports

        modules += cythonize([Extension(DRIVER_MODULE, [DRIVER_MODULE.replace(".", "/") + ".pyx"],
                                        include_dirs=_cuda_include_dirs(),
                                        extra_compile_args=COMPILE_ARGS)], **options)
    except Exception as exc:  # noqa: BLE001 - (ImportError included): CuPy's calls instead
        _say(f"the CUDA driver calls will not be compiled ({exc}); CUDA launches will go "
             "through CuPy's calls")
    return modules


class OptionalBuildExt(build_ext):
    """``build_ext`` that compiles in parallel, and whose failure is one line, not an error
    (unless ``ASYNCGPU_BUILD=required``)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any failure leaves the plain Python modules
            if MODE == "required":
                raise
            self._give_up(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if ext.name == DRIVER_MODULE:       # (independent of the rest: CuPy's calls instead)
                _say(f"the CUDA driver calls were not compiled ({str(exc).strip()}); CUDA "
                     "launches will go through CuPy's calls")
                self.extensions.remove(ext)     # (nothing of it to copy into the package)
                return
            if MODE == "required":
                raise
            self._give_up(exc)

    def _give_up(self, exc: BaseException) -> None:
        # A partly compiled package would mix compiled and Python classes that must agree on
        # their layout: drop every compiled module, keep the Python ones.
        for ext in self.extensions:
            path = self.get_ext_fullpath(ext.name)
            if ext.name != DRIVER_MODULE and os.path.exists(path):
                os.remove(path)
        self.extensions = []
        _say(f"compiling the launch path failed ({str(exc).strip() or type(exc).__name__}); "
             "it will run as plain Python")


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
