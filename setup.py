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

import glob
import os
import re
import shutil
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
ROOT = os.path.dirname(os.path.abspath(__file__))
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
if MODE not in ("optional", "required", "python"):
    raise SystemExit(f"asyncgpu: ASYNCGPU_BUILD={MODE!r} is not valid: use optional (the "
                     "default), required or python")


def _say(text: str) -> None:
    sys.stderr.write(f"asyncgpu: {text}\n")
    sys.stderr.flush()


def _bindings_version() -> tuple[int, int] | None:
    """The major and minor version of the cuda-bindings the driver module compiles against."""
    try:
        from cuda import bindings

        major, minor = bindings.__version__.split(".")[:2]
        return int(major), int(minor)
    except Exception:  # noqa: BLE001 - (no cuda-bindings, or a version we cannot read)
        return None


def _header_version(folder: str) -> tuple[int, int] | None:
    """The CUDA version of ``folder``'s ``cuda.h`` (``CUDA_VERSION``), or None."""
    try:
        with open(os.path.join(folder, "cuda.h")) as header:
            found = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", header.read())
    except OSError:
        return None
    return None if found is None else (int(found.group(1)) // 1000,
                                       int(found.group(1)) % 1000 // 10)


def _cuda_include_dirs() -> list[str]:
    """Where ``cuda.h`` is, for cuda-bindings' ``cydriver.pxd``: the toolkit's (it also has
    ``cudaProfiler.h``, which older ``cydriver.pxd`` files include) and those of the
    ``nvidia-cuda-runtime`` wheel (a build requirement), the first whose version is at least
    cuda-bindings' first of all: ``cydriver.pxd`` declares the driver of its own version, and
    older headers lack some of its types."""
    found = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "include", "cuda.h")):
            found.append(os.path.join(root, "include"))
    try:    # (the wheel's folder: nvidia/cu13/include, or nvidia/cuda_runtime/include for 12)
        import nvidia

        for root in nvidia.__path__:
            found += sorted(glob.glob(os.path.join(root, "*", "include", "cuda.h")))
    except Exception:  # noqa: BLE001 - (no such wheel)
        pass
    found = list(dict.fromkeys(os.path.dirname(f) if f.endswith(".h") else f for f in found))
    wanted = _bindings_version()
    if wanted is None:
        return found
    return sorted(found, key=lambda folder: (_header_version(folder) or (0, 0)) < wanted)


def _version_hint() -> str:
    """Why the driver module may not compile: headers older than cuda-bindings."""
    wanted = _bindings_version()
    folders = _cuda_include_dirs()
    have = _header_version(folders[0]) if folders else None
    if wanted is None or have is None or have >= wanted:
        return ""
    return (f". cuda-bindings {wanted[0]}.{wanted[1]} needs the CUDA {wanted[0]}.{wanted[1]} "
            f"headers; {folders[0]} has CUDA {have[0]}.{have[1]}: install the "
            f"nvidia-cuda-runtime wheel of {wanted[0]}.{wanted[1]} (or point CUDA_HOME at a "
            "newer toolkit) and reinstall")


def _compiler_problem() -> str | None:
    """Why the C compiler cannot build a module, from compiling an empty one (a fraction of a
    second: translating the launch path to C first took half a minute before the compiler
    failed); None if it can."""
    import tempfile

    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    try:
        compiler = new_compiler()
        customize_compiler(compiler)
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "probe.c")
            with open(source, "w") as f:
                f.write("int asyncgpu_probe(void) { return 0; }\n")
            compiler.compile([source], output_dir=tmp)
    except Exception as exc:  # noqa: BLE001 - any failure: no compiled module can be built
        return (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return None


#: Whether setuptools was asked to build (pip's other calls of this file ask for metadata
#: only: the compiler is tried, and its failure said, once, at the build).
BUILDING = bool({"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install",
                 "bdist_egg"} & set(sys.argv[1:]))


def _extensions() -> list[Extension]:
    if MODE == "python" or not BUILDING:
        return []
    problem = _compiler_problem()
    if problem is not None:
        if MODE == "required":
            raise SystemExit(f"asyncgpu: the C compiler cannot build the launch path ({problem})")
        _say(f"compiling the launch path failed ({problem}); it will run as plain Python")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if MODE == "required":
            raise
        _say("Cython is not installed; the launch path will run as plain Python")
        return []
    build_dir = os.path.join(ROOT, "build", "cython")
    options = dict(compiler_directives=DIRECTIVES, quiet=True, nthreads=os.cpu_count() or 1,
                   build_dir=build_dir)
    modules, stale = _translated(build_dir)
    try:
        if stale:
            modules += cythonize([Extension(name, [name.replace(".", "/") + ".py"],
                                            extra_compile_args=COMPILE_ARGS)
                                  for name in stale], **options)
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


def _translated(build_dir: str) -> tuple[list[Extension], list[str]]:
    """The modules of :data:`HOT_MODULES` whose C in ``build_dir`` a build of this tree left
    current, as extensions of that C, and the names of the others, to translate. Current: made
    by the installed Cython, and newer than the module, every ``.pxd`` of the package and this
    file (its directives). Cython's own test also weighs its include files, which pip installs
    anew for each build: every module cimporting ``libc`` was translated again each time."""
    from Cython import __version__ as version

    inputs = glob.glob(os.path.join(ROOT, "asyncgpu", "**", "*.pxd"), recursive=True)
    newest = max([os.path.getmtime(os.path.abspath(__file__))]
                 + [os.path.getmtime(f) for f in inputs])
    current, stale = [], []
    for name in HOT_MODULES:
        path = name.replace(".", "/")
        c_file = os.path.join(build_dir, path + ".c")
        try:
            with open(c_file) as f:
                made_by = f.readline().strip()
            fresh = (made_by == f"/* Generated by Cython {version} */"
                     and os.path.getmtime(c_file) >= max(newest, os.path.getmtime(
                         os.path.join(ROOT, path + ".py"))))
        except OSError:
            fresh = False
        if fresh:
            current.append(Extension(name, [c_file], extra_compile_args=COMPILE_ARGS))
        else:
            stale.append(name)
    return current, stale


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

    def build_extensions(self) -> None:
        # (the modules build in parallel: what failed is noted, and acted on once all ended)
        self._failed: list[BaseException] = []
        self._skipped: list[str] = []
        super().build_extensions()
        self.extensions = [e for e in self.extensions if e.name not in self._skipped]
        if self._failed:
            self._give_up(self._failed[0])      # (one line, the driver calls' failure in it)
        elif self._skipped:
            _say(f"the CUDA driver calls were not compiled ({self._skipped_why}); CUDA "
                 f"launches will go through CuPy's calls{_version_hint()}")

    def build_extension(self, ext: Extension) -> None:
        if self._reuse_in_tree(ext):
            return
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if ext.name == DRIVER_MODULE:       # (independent of the rest: CuPy's calls instead)
                self._skipped_why = str(exc).strip()
                self._skipped.append(ext.name)  # (nothing of it to copy into the package)
                return
            if MODE == "required":
                raise
            self._failed.append(exc)            # (list.append: safe from the build's threads)

    def _reuse_in_tree(self, ext: Extension) -> bool:
        """Copy the module a build of this tree left beside its source, where it is newer than
        every file it is built from, instead of compiling it again: pip builds an editable
        install's modules in a new folder each time, so the README's second install compiled
        everything the first had (minutes on two cores). The file's name carries the
        interpreter's ABI, so only a module built for this one is taken; one older than this
        file (its compiler flags) is compiled again."""
        if self.inplace or self.force:
            return False
        suffix = os.path.basename(self.get_ext_filename(ext.name)).split(".", 1)[1]
        built = os.path.join(ROOT, *ext.name.split(".")) + "." + suffix
        sources = list(ext.sources) + list(ext.depends or []) + [os.path.abspath(__file__)]
        if not os.path.exists(built) or not sources or not all(map(os.path.exists, sources)):
            return False
        if max(os.path.getmtime(f) for f in sources) > os.path.getmtime(built):
            return False
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(built, target)
        return True

    def _give_up(self, exc: BaseException) -> None:
        # A partly compiled package would mix compiled and Python classes that must agree on
        # their layout: drop every compiled module, keep the Python ones.
        for ext in self.extensions:
            path = self.get_ext_fullpath(ext.name)
            if ext.name != DRIVER_MODULE and os.path.exists(path):
                os.remove(path)
        self.extensions = []
        # (the first line of the reason: a failed compiler command names every flag)
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        if len(reason) > 160:
            reason = reason[:157] + "..."
        _say(f"compiling the launch path failed ({reason}); it will run as plain Python")


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
