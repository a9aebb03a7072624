"""Command line for the reference cluster.

    python -m tools.reference up [--version V] [--workdir DIR]    # prints READY ..., runs until Ctrl-C/SIGTERM
    python -m tools.reference jars [--version V]                  # resolves the official jars, prints lib dir
    python -m tools.reference mqadmin -n ADDR [--version V] <mqadmin args...>
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from tools.reference import jars
from tools.reference.jars import ReferenceUnavailable


def _up(args: argparse.Namespace) -> int:
    from tools.reference.cluster import ReferenceCluster, ReferenceStartError

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster = ReferenceCluster(version=args.version, workdir=args.workdir)
    try:
        cluster.start()
        for name in args.add_broker:
            cluster.add_broker(name)
        brokers = " ".join(f"broker={b.addr}" for b in cluster.brokers)
        print(f"READY namesrv={cluster.namesrv_addr} {brokers}", flush=True)
        print(f"# timings: {cluster.timings}", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    except ReferenceStartError as exc:
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
    return 0


def _jars(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    lib = jars.ensure_jars(args.version)
    count = sum(1 for _ in lib.glob("*.jar"))
    print(f"{lib} ({count} jars, {time.monotonic() - t0:.1f}s)")
    return 0


def _mqadmin(args: argparse.Namespace) -> int:
    from tools.reference.mqadmin import run_mqadmin

    result = run_mqadmin(args.namesrv, *args.args, timeout=args.timeout, version=args.version)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start NameServer + Broker and wait")
    up.add_argument("--version", default=jars.DEFAULT_VERSION)
    up.add_argument("--workdir", default=None)
    up.add_argument("--add-broker", action="append", default=[], metavar="NAME",
                    help="start one more broker with this name (repeatable)")
    up.set_defaults(func=_up)
    j = sub.add_parser("jars", help="resolve the official jars from Maven Central")
    j.add_argument("--version", default=jars.DEFAULT_VERSION)
    j.set_defaults(func=_jars)
    m = sub.add_parser("mqadmin", help="run the official mqadmin against a NameServer")
    m.add_argument("-n", "--namesrv", required=True)
    m.add_argument("--version", default=jars.DEFAULT_VERSION)
    m.add_argument("--timeout", type=float, default=60.0)
    m.add_argument("args", nargs=argparse.REMAINDER)
    m.set_defaults(func=_mqadmin)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ReferenceUnavailable as exc:
        print(f"UNAVAILABLE {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
