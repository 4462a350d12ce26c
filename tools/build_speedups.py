"""Build ``asyncgpu._speedups`` in place, in a source tree run without ``pip install`` (the GPU
machine runs the package from the tree with ``PYTHONPATH=.``).

It calls the C compiler directly with this Python's include directory and extension suffix,
so it needs neither setuptools nor a network. ``pip install`` builds the same module through
setuptools (``pyproject.toml``, ``ext-modules``). Exits 0 with a message and no module when
there is no C compiler: asyncgpu then uses the Python launcher call.

usage: python3 tools/build_speedups.py
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    sources = sorted(glob.glob(os.path.join(ROOT, "asyncgpu", "csrc", "*.c")))
    target = os.path.join(ROOT, "asyncgpu", "_speedups" + sysconfig.get_config_var("EXT_SUFFIX"))
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("build_speedups: no C compiler; asyncgpu will use its Python launcher call")
        return 0
    # (built beside the target, then renamed over it: a process that has the old module
    # loaded keeps its copy instead of seeing the file change under it)
    partial = target + ".partial"
    cmd = [cc, "-O2", "-shared", "-fPIC", "-Wall", "-Werror",
           "-I" + sysconfig.get_paths()["include"], *sources, "-o", partial]
    print(" ".join(cmd))
    subprocess.run(cmd, check=True)
    os.replace(partial, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
