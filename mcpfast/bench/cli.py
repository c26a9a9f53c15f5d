"""The ``bench``, ``capacity``, ``report`` and ``compare`` subcommands of ``mcpfast`` (the last two
read results only: :mod:`mcpfast.results`):
``mcpfast/cli.py`` wires them in with :func:`add_subcommands` (on its subparsers) and
:func:`run_subcommand` (for ``args.command`` in :data:`COMMANDS`).

Importing this module is cheap: Locust and matplotlib are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path
from typing import Any

from mcpfast.locust.argtypes import finite_positive, int_at_least, positive_share, rate, share

__all__ = ["COMMANDS", "add_subcommands", "run_subcommand"]

COMMANDS = ("bench", "capacity", "report", "compare")


def add_subcommands(subparsers: Any) -> None:
    """Register ``bench``, ``capacity``, ``report`` and ``compare`` on an ``add_subparsers()`` object."""
    from mcpfast.bench import capacity, soak
    from mcpfast.bench.run import DEFAULT_DURATION, DEFAULT_USERS, FAMILIES, QUICK_DURATION, QUICK_USERS, BenchConfig

    bench = subparsers.add_parser(
        "bench",
        help="run the loadtest families through the Locust swarm; summary, CSV/HTML and plots",
        description="Run handshake, tools_call, sse_streaming and session_churn headless through the Locust swarm "
        "(one locust subprocess per family and transport) against the embedded reference server or a target; "
        "write summary.json, Locust CSV/HTML, µs histograms and PNG plots to --out.",
    )
    bench.add_argument(
        "--quick", action="store_true", help=f"short run: {QUICK_DURATION:g} s per family, {QUICK_USERS} users (under 2 minutes)"
    )
    target = bench.add_argument_group("target (default: the embedded reference server)")
    target.add_argument("--target", metavar="URL", help="Streamable HTTP endpoint to measure (e.g. http://127.0.0.1:8000/mcp)")
    target.add_argument("--target-command", metavar="COMMAND", help='stdio server command (e.g. "node server.js")')
    target.add_argument("--server-pid", type=int, default=0, help="with --target: the server's pid (churn memory)")
    bench.add_argument(
        "--transport", choices=("http", "stdio", "both"), default=None,
        help="default: both (http only with --target, stdio only with --target-command)",
    )  # fmt: skip
    bench.add_argument("--out", metavar="DIR", help="result directory (default bench_results/<UTC timestamp>)")
    bench.add_argument(
        "--users", type=int_at_least(1), help=f"concurrent users per family (default {DEFAULT_USERS}; --quick {QUICK_USERS})"
    )
    bench.add_argument(
        "--duration", type=finite_positive, help=f"seconds per family (default {DEFAULT_DURATION:g}; --quick {QUICK_DURATION:g})"
    )
    bench.add_argument("--rate", type=rate, default=0.0, help="open model: target requests/s per family (default 0: closed)")
    bench.add_argument("--family", action="append", choices=FAMILIES, help="run only this family (repeatable)")
    bench.add_argument("--protocol-version", help="MCP revision the swarm speaks (default: the swarm's, 2025-11-25)")
    bench.add_argument(
        "--churn-delete-share", type=share, default=None,
        help=f"session churn: share of sessions ended with DELETE, the rest abandoned (default {BenchConfig.churn_delete_share:g}; "
        f"--soak {soak.SoakConfig.churn_delete_share:g})",
    )  # fmt: skip
    bench.add_argument("--loadtests", metavar="DIR", help="the loadtests/ directory (default: the repository's)")
    bench.add_argument(
        "--engine", choices=("native", "python"), help="the swarm's engine (--mcp-engine; default native when the core has it)"
    )
    bench.add_argument("--locust-arg", action="append", default=[], metavar="ARG", help="extra argument for every locust run")
    bench.add_argument("--no-plots", action="store_true", help="skip the PNG plots (run `mcpfast report` later)")
    from mcpfast.locust.thresholds import argument_type

    bench.add_argument(
        "--threshold",
        "--mcp-threshold",
        dest="threshold",
        action="append",
        default=[],
        type=argument_type,
        metavar="EXPR",
        help="CI gate on each family's µs histograms, repeatable: 'tools/call:echo p99<5ms', "
        "'fail_ratio<0.001', 'initialize rps>500' (a failing gate: exit code 1)",
    )

    soaking = bench.add_argument_group(
        "soak (an open-model run at a share of the capacity measured first; HTTP only)",
        f"--duration is then the closed-model capacity run (default {soak.DEFAULT_CAPACITY_S:g} s), --users the tools/call sessions "
        f"(default {soak.DEFAULT_USERS}); --target needs --server-pid; --out defaults to {soak.DEFAULT_OUT}",
    )
    soaking.add_argument("--soak", type=_soak_minutes, metavar="MINUTES", help="soak for MINUTES (fractions allowed, e.g. 0.5)")
    soaking.add_argument(
        "--soak-share", type=positive_share, default=None, metavar="SHARE",
        help=f"share of the measured capacity the soak runs at, within (0, 1] (default {soak.DEFAULT_SHARE:g})",
    )  # fmt: skip
    soaking.add_argument(
        "--soak-interval", type=finite_positive, default=None, metavar="SECONDS",
        help=f"report (and fit slopes over) intervals of this many seconds (default {soak.DEFAULT_INTERVAL_S:g})",
    )  # fmt: skip

    capacity.add_parser(subparsers)
    report = subparsers.add_parser("report", help="redraw the plots and report.html of a bench run (or a capacity search) from its files")
    report.add_argument("run", metavar="RUN", help="a directory written by `mcpfast bench` or `mcpfast capacity`")

    from mcpfast.results.compare import __doc__ as how

    compare = subparsers.add_parser(
        "compare",
        help="each percentile's change from run A to run B, judged against the runs' own noise (exit 1: a regression)",
        description=(how or "").split("\n\n")[1].replace("\n", " "),
    )
    compare.add_argument("run_a", metavar="RUN_A", help="a bench folder, or a locust run's PREFIX_histograms.json (or PREFIX)")
    compare.add_argument("run_b", metavar="RUN_B", help="the same kind of run, to judge against RUN_A")
    compare.add_argument("--max-regression", type=_percent, default=10.0, metavar="PCT",
                         help="a change beyond noise fails the check (exit 1) only above this many percent (default 10)")  # fmt: skip
    compare.add_argument("--confidence", type=_confidence, default=0.99, metavar="C",
                         help="the rank test's confidence, between 0.5 and 0.999 (default 0.99)")  # fmt: skip
    compare.add_argument("--out", metavar="DIR", help="where compare-<a>-vs-<b>.json and .png go (default RUN_B's folder)")
    compare.add_argument("--no-plots", action="store_true", help="no PNG (the JSON still)")


def _percent(text: str) -> float:
    """--max-regression PCT: a number of percent >= 0, with or without '%'."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = -1.0
    if not (0.0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"PCT must be a number of percent >= 0 (e.g. 10 or 10%), got {text!r}")
    return value


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.5 <= value <= 0.999:
        raise argparse.ArgumentTypeError(f"the confidence is between 0.5 and 0.999 (e.g. 0.99), got {text!r}")
    return value


def _soak_minutes(text: str) -> float:
    """--soak MINUTES: a finite number above zero (a message that names the unit)."""
    try:
        return finite_positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"MINUTES must be a finite number > 0 (e.g. 20 or 0.5), got {text!r}") from None


# options of the family bench that a soak does not take: (attribute, its unset value, the flag)
_NOT_WITH_SOAK: tuple[tuple[str, Any, str], ...] = (
    ("quick", False, "--quick"),
    ("target_command", None, "--target-command"),
    ("rate", 0.0, "--rate (the soak's rate is --soak-share of the measured capacity)"),
    ("family", None, "--family"),
    ("loadtests", None, "--loadtests"),
    ("locust_arg", [], "--locust-arg"),
    ("threshold", [], "--threshold"),
)


def _given(**values: Any) -> dict[str, Any]:
    """The options given on the command line (the rest keep the config's defaults)."""
    return {k: v for k, v in values.items() if v is not None}


def _soak(args: argparse.Namespace) -> int:
    from mcpfast.bench.soak import DEFAULT_OUT, SoakConfig, run_soak

    refused = [flag for attr, unset, flag in _NOT_WITH_SOAK if getattr(args, attr) != unset]
    if args.transport not in (None, "http"):
        refused.append(f"--transport {args.transport} (the soak runs over HTTP)")
    if args.engine == "python":
        refused.append("--engine python (the soak needs the native engine's open model)")
    if refused:
        print(f"mcpfast bench: not with --soak: {', '.join(refused)}", file=sys.stderr)
        return 2
    cfg = SoakConfig(
        out=(Path(args.out) if args.out else DEFAULT_OUT).resolve(),
        minutes=args.soak,
        target=args.target,
        server_pid=args.server_pid,
        protocol_version=args.protocol_version,
        make_plots=not args.no_plots,
        **_given(
            share=args.soak_share,
            interval_s=args.soak_interval,
            capacity_s=args.duration,
            users=args.users,
            churn_delete_share=args.churn_delete_share,
        ),
    )
    return run_soak(cfg)


def _bench(args: argparse.Namespace) -> int:
    if args.soak is not None:
        return _soak(args)
    if args.soak_share is not None or args.soak_interval is not None:
        print("mcpfast bench: --soak-share and --soak-interval need --soak MINUTES", file=sys.stderr)
        return 2
    from mcpfast.bench.run import FAMILIES, QUICK_DURATION, QUICK_USERS, TRANSPORTS, BenchConfig, run_bench

    if args.transport is not None:
        transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    elif bool(args.target) != bool(args.target_command):  # a target says which transport
        transports = ("http",) if args.target else ("stdio",)
    else:
        transports = TRANSPORTS
    out = Path(args.out) if args.out else Path("bench_results") / _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    cfg = BenchConfig(
        out=out.resolve(),
        transports=transports,
        rate=args.rate,
        target=args.target,
        target_command=args.target_command,
        server_pid=args.server_pid,
        families=tuple(f for f in FAMILIES if f in args.family) if args.family else FAMILIES,
        protocol_version=args.protocol_version,
        quick=args.quick,
        locust_args=tuple(args.locust_arg),
        engine=args.engine,
        thresholds=tuple(args.threshold),
        **_given(
            users=args.users or (QUICK_USERS if args.quick else None),
            duration=args.duration or (QUICK_DURATION if args.quick else None),
            churn_delete_share=args.churn_delete_share,
            loadtests=Path(args.loadtests).resolve() if args.loadtests else None,
        ),
    )
    if not (cfg.loadtests / "handshake.py").is_file():
        print(f"mcpfast bench: no loadtests in {cfg.loadtests} (use --loadtests DIR)", file=sys.stderr)
        return 2
    return run_bench(cfg, make_plots=not args.no_plots)


def _report(args: argparse.Namespace) -> int:
    from mcpfast.results import files
    from mcpfast.results.report import format_summary, redraw_bench, redraw_capacity

    run = Path(args.run)
    if (run / "capacity.json").is_file():
        print("".join(f"written: {p}\n" for p in redraw_capacity(run)), end="")
        return 0
    if files.is_soak(run):
        from mcpfast.bench.soak import redraw

        print(f"{len(redraw(run))} plots written to {run} (a soak: results.md rewritten)")
        return 0
    summary = files.load_summary(run)
    page = redraw_bench(run, summary)[-1]
    files.write_summary(run, summary)
    print(format_summary(summary))
    print(f"{len(summary['plots'])} plots written to {run}; the page: {page}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from mcpfast.results import compare

    try:
        a, b = compare.load(args.run_a), compare.load(args.run_b)
    except compare.CompareError as exc:
        print(f"mcpfast compare: {exc}", file=sys.stderr)
        return 2
    result = compare.compare(a, b, confidence=args.confidence, max_regression=args.max_regression / 100.0)
    print(compare.render(result))
    out = Path(args.out) if args.out else (b.path if b.kind == "bench" else b.path.parent)
    for path in compare.write(result, out, plot=not args.no_plots):
        print(f"written: {path}")
    return result.exit_code


def run_subcommand(args: argparse.Namespace) -> int:
    """Run ``args.command`` (one of :data:`COMMANDS`); returns the exit code."""
    from mcpfast.bench.capacity import run as capacity

    run = {"bench": _bench, "capacity": capacity, "report": _report, "compare": _compare}.get(getattr(args, "command", None) or "")
    if run is None:
        raise ValueError(f"not a bench subcommand: {args.command!r}")
    return run(args)
