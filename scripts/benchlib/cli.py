"""The command line of scripts/bench: option parsing and checks, the signal handlers and the
open-files limit, then one Bench run. The help text is scripts/bench's docstring, passed in.
"""

from __future__ import annotations

import argparse
import signal

from .bench import Bench
from .config import SYSTEMS_ALL, WORKLOADS_ALL, log
from .proc import RunFailed, _on_signal


def main(doc: str):
    ap = argparse.ArgumentParser(prog="scripts/bench", add_help=False, usage=argparse.SUPPRESS)
    ap.add_argument("-h", "--help", action="store_true")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--full", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--workloads", type=lambda s: [x.strip() for x in s.split(",") if x.strip()])
    ap.add_argument("--systems", type=lambda s: [x.strip() for x in s.split(",") if x.strip()])
    ap.add_argument("--out")
    ap.add_argument("--ketch-bin")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--tmp")
    ap.add_argument("--keep-data", action="store_true")
    a = ap.parse_args()
    if a.help:
        print(doc)
        return 0
    for w in a.workloads or []:
        if w not in WORKLOADS_ALL:
            ap.error(f"unknown workload {w!r} (one of {', '.join(WORKLOADS_ALL)})")
    for s in a.systems or []:
        if s not in SYSTEMS_ALL:
            ap.error(f"unknown system {s!r} (one of {', '.join(SYSTEMS_ALL)})")
    if a.systems:
        a.systems = [s for s in SYSTEMS_ALL if s in a.systems]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    # 10,000 partitions need one or more open files each, 1,000 clients a socket each: raise the
    # open-files limit (inherited by every broker) as far as allowed, as a production setup would.
    import resource

    for want in (1 << 20, None):
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            lim = want or hard
            resource.setrlimit(resource.RLIMIT_NOFILE, (lim, max(lim, hard) if want else hard))
            break
        except (ValueError, OSError):
            continue
    try:
        Bench(a).run_all()
    except RunFailed as e:
        log(f"cannot run the benchmark: {e}")
        return 1
    return 0
