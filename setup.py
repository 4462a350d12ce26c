"""Build hook for the optional C extension ``asyncgpu._speedups``; everything else is declared in
pyproject.toml.

Where the extension cannot be compiled (no C compiler, no Python headers) the install goes on
and asyncgpu uses the same methods in Python. The compiler's output is then replaced by one line
naming the reason, rather than pages of compiler errors (or nothing at all).
"""

from __future__ import annotations

import os
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` whose failure to compile the extension is one line and no error."""

    def build_extension(self, ext):
        with tempfile.TemporaryFile(mode="w+b") as captured:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = os.dup(1), os.dup(2)
            os.dup2(captured.fileno(), 1)     # the compiler writes to the inherited descriptors
            os.dup2(captured.fileno(), 2)
            try:
                super().build_extension(ext)
                error = None
            except Exception as exc:  # noqa: BLE001 - any failure leaves the Python methods
                error = exc
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
            captured.seek(0)
            output = captured.read().decode(errors="replace")
        if error is None:
            sys.stdout.write(output)
            return
        reason = next((line.strip() for line in output.splitlines() if "error" in line.lower()),
                      str(error).strip() or type(error).__name__)
        sys.stderr.write(f"asyncgpu: optional C extension {ext.name} not built ({reason}); "
                         "asyncgpu will use its Python methods\n")


setup(cmdclass={"build_ext": OptionalBuildExt})
