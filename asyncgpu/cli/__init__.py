"""The ``asyncgpu`` command's subcommands (``asyncgpu.__main__`` parses the command line):
``bench`` (:mod:`.bench`), ``trace`` (:mod:`.trace`), and what they share: the benchmark
suite's modules and scales (:mod:`.suite`), the terminal's tables (:mod:`.tables`).
"""
