"""stubtest of ``mcpfast/_core.pyi`` against the pure-Python twin (``make lint``).

The stub is the contract both implementations honour and ``mcpfast.core`` gives its names the
stub's types whichever one loads, so the twin is held to it as the compiled core is: stubtest
imports ``mcpfast._core`` and gets the twin in its place. Run from the repository root; the
arguments are stubtest's.
"""

from __future__ import annotations

import os
import sys

from mypy import stubtest

os.environ["MCPFAST_CORE"] = "python"  # load the twin alone: the compiled core never imported

from mcpfast.core import _python  # after the choice of core above

sys.modules["mcpfast._core"] = _python

if __name__ == "__main__":
    sys.argv[0] = "stubtest"
    sys.exit(stubtest.main())
