"""The maintainer benchmarks and A/B tools of mcpfast (not shipped in the wheel).

Run from the repository root as ``python -m benchmarks.<tool> ...`` (``--help`` on each); every
tool measures with :mod:`benchmarks.harness` and writes its results, with the command that made
them, into ``bench_results/<area>/``. ``lua/`` holds wrk's scripts, ``sh/`` the shell runners.
"""
