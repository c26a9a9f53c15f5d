"""The doorway ``mcpfast.core`` picks the implementation named by ``MCPFAST_CORE``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mcpfast.core

ROOT = Path(__file__).resolve().parents[2]

# Makes the compiled core unimportable in the child before mcpfast.core is imported.
BLOCK_RUST = 'import sys; sys.modules["mcpfast._core"] = None\n'


def _rust_importable() -> bool:
    try:
        mcpfast.core.load("rust")
    except ImportError:
        return False
    return True


def run_child(code: str, core: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MCPFAST_CORE"}
    if core is not None:
        env["MCPFAST_CORE"] = core
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_implementation_matches_environment(allow_no_rust: bool) -> None:
    forced = os.environ.get("MCPFAST_CORE", "").strip().lower()
    if forced and forced != "auto":
        assert mcpfast.core.IMPLEMENTATION == forced
    elif _rust_importable():
        assert mcpfast.core.IMPLEMENTATION == "rust"
    else:
        assert allow_no_rust, "the compiled core is not importable"
        assert mcpfast.core.IMPLEMENTATION == "python"


def test_exports_come_from_the_loaded_implementation() -> None:
    impl = mcpfast.core.load(mcpfast.core.IMPLEMENTATION)
    assert mcpfast.core.decode is impl.decode
    assert mcpfast.core.Message is impl.Message
    assert mcpfast.core.DEFAULT_MAX_DEPTH == impl.DEFAULT_MAX_DEPTH == 128
    assert mcpfast.core.DEFAULT_MAX_LINE == impl.DEFAULT_MAX_LINE == 4 * 1024 * 1024
    assert mcpfast.core.DEFAULT_MAX_EVENT == impl.DEFAULT_MAX_EVENT == 4 * 1024 * 1024


def test_load_unknown_name_is_value_error() -> None:
    with pytest.raises(ValueError, match="MCPFAST_CORE"):
        mcpfast.core.load("bogus")


def test_python_twin_identity() -> None:
    twin = mcpfast.core.load("python")
    assert twin.build_profile == "python"
    assert twin.__version__ == mcpfast.core.__version__


def test_rust_version_matches(allow_no_rust: bool) -> None:
    if not _rust_importable():
        if allow_no_rust:
            pytest.skip("compiled core not importable (MCPFAST_ALLOW_NO_RUST=1)")
        pytest.fail("the compiled core mcpfast._core is not importable")
    rust = mcpfast.core.load("rust")
    assert rust.__version__ == mcpfast.core.__version__
    assert isinstance(rust.build_profile, str) and rust.build_profile


def test_forced_python() -> None:
    proc = run_child("import mcpfast.core as c; print(c.IMPLEMENTATION)", "python")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python"


def test_forced_rust_without_extension_is_import_error() -> None:
    code = BLOCK_RUST + textwrap.dedent(
        """
        try:
            import mcpfast.core
        except ImportError as exc:
            print("ImportError", exc)
        else:
            print("loaded", mcpfast.core.IMPLEMENTATION)
        """
    )
    proc = run_child(code, "rust")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ImportError"), proc.stdout
    assert "MCPFAST_CORE=rust" in proc.stdout


def test_forced_rust_with_extension(allow_no_rust: bool) -> None:
    if not _rust_importable():
        if allow_no_rust:
            pytest.skip("compiled core not importable (MCPFAST_ALLOW_NO_RUST=1)")
        pytest.fail("the compiled core mcpfast._core is not importable")
    proc = run_child("import mcpfast.core as c; print(c.IMPLEMENTATION)", "rust")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "rust"


@pytest.mark.parametrize("choice", [None, "auto", ""])
def test_auto_prefers_rust(allow_no_rust: bool, choice: str | None) -> None:
    if not _rust_importable():
        if allow_no_rust:
            pytest.skip("compiled core not importable (MCPFAST_ALLOW_NO_RUST=1)")
        pytest.fail("the compiled core mcpfast._core is not importable")
    code = """
        import warnings
        warnings.simplefilter("error")
        import mcpfast.core as c
        print(c.IMPLEMENTATION)
        """
    proc = run_child(code, choice)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "rust"


def test_bogus_choice_is_value_error() -> None:
    code = """
        try:
            import mcpfast.core
        except ValueError as exc:
            print("ValueError", exc)
        else:
            print("loaded")
        """
    proc = run_child(code, "bogus")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ValueError"), proc.stdout


@pytest.mark.parametrize("choice", [None, "auto"])
def test_auto_falls_back_with_runtime_warning(choice: str | None) -> None:
    code = BLOCK_RUST + textwrap.dedent(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import mcpfast.core
        print(mcpfast.core.IMPLEMENTATION)
        print(",".join(w.category.__name__ for w in caught))
        """
    )
    proc = run_child(code, choice)
    assert proc.returncode == 0, proc.stderr
    impl, categories = proc.stdout.splitlines()
    assert impl == "python"
    assert "RuntimeWarning" in categories.split(",")


def test_a_rust_panic_reaches_python_as_an_ordinary_exception(allow_no_rust: bool) -> None:
    """The guard around every entry point turns a panic into RuntimeError (an Exception), never
    PyO3's PanicException (a BaseException that `except Exception` would not stop)."""
    try:
        from mcpfast import _core
    except ImportError:
        if allow_no_rust:
            pytest.skip("compiled core not importable (MCPFAST_ALLOW_NO_RUST=1)")
        raise
    with pytest.raises(RuntimeError, match=re.escape("internal error in mcpfast._core")):
        _core._panic_for_tests()
