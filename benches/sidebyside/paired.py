"""The command line of a paired bench (klog and Kafka measured in one run, rounds alternating which goes first):
``--rounds``, ``--scale``, ``--short`` and ``--out``, and a bench's own options (``add_arguments``: each is
passed to its ``run`` as a keyword argument); the run in a temporary directory, its table printed and its
results written as JSON (``benches/bench_transactions.py``, ``benches/bench_share_groups.py``). A run that
fails keeps its directory and says where."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: run(workdir, rounds, scale, log, **the bench's own options) -> the results (a JSON-able dict)
Run = Callable[..., dict[str, Any]]


def paired_main(argv: list[str] | None, *, doc: str | None, run: Run, format_table: Callable[[dict[str, Any]], str],
                results: Path, short_scale: float, rounds: int, prefix: str,
                footer: Callable[[dict[str, Any]], str] | None = None,
                add_arguments: Callable[[argparse.ArgumentParser], None] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--scale", type=float, default=1.0, help="share of each round's record counts")
    parser.add_argument("--short", action="store_true", help=f"one round at scale {short_scale}")
    parser.add_argument("--out", type=Path, default=None, help=f"JSON results (default {results}; none if --short)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("rounds", "scale", "short", "out")}
    n, scale = (1, short_scale) if args.short else (args.rounds, args.scale)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        result = run(work, n, scale, lambda line: print(line, flush=True), **options)
    except BaseException:
        # a failed run keeps its brokers' and drivers' logs for the post-mortem
        print(f"the run failed: its work directory (broker and driver logs) is kept in {work}", flush=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    print(format_table(result))
    if footer is not None:
        print(footer(result))
    out = args.out or (None if args.short else results)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out}")
    return 0
