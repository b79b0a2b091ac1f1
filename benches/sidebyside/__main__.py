"""``PYTHONPATH=benches python -m sidebyside [--quick] [--runs N] ...``: klog vs Apache Kafka, same machine,
same run. Writes the raw results (JSON), docs/performance.md and the charts in docs/img/.

``tools/bench-sidebyside.sh`` (``make sidebyside``) is the documented way to run it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from . import cluster, machine, report, runner
from .brokers import shared_properties
from .workloads import matrix, select

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sidebyside", description=__doc__)
    p.add_argument("--runs", type=int, default=3, help="repeated paired runs (default 3)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply record counts and durations")
    p.add_argument("--quick", action="store_true", help="one workload of each kind, tiny volumes (smoke test)")
    p.add_argument("--brokers", default="kafka,klog", help="comma-separated: kafka,klog")
    p.add_argument("--only", action="append", default=[],
                   help="run only workloads whose id contains this text (repeatable: any of them); a "
                        "selected consume workload brings along the produce workload that fills its topic")
    p.add_argument("--workdir", type=Path, default=REPO / ".cache" / "sidebyside",
                   help="broker data and logs (default .cache/sidebyside)")
    p.add_argument("--results", type=Path, default=None,
                   help="results JSON (default: docs/performance.json, or WORKDIR/results.json with --quick or --only)")
    p.add_argument("--docs", type=Path, default=None,
                   help="where performance.md and img/ go (default docs/, or WORKDIR/docs with --quick or --only)")
    p.add_argument("--klog-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a server.properties setting for klog only (repeatable; recorded in the results)")
    p.add_argument("--report-only", action="store_true", help="regenerate the report from --results")
    p.add_argument("--cluster", type=int, default=0, metavar="3",
                   help="compare 3-node clusters (replication factor 3) instead of single brokers")
    p.add_argument("--together", action="store_true",
                   help="with --cluster: both clusters up at once, each measurement on one then the other (default: "
                        "one cluster up at a time, so the idle one's background work does not share the cores)")
    args = p.parse_args(argv)
    if args.cluster:
        if args.cluster != cluster.NODES:
            p.error(f"--cluster {args.cluster}: only {cluster.NODES}-node clusters are compared")
        return _cluster_comparison(args, argv)

    # A smoke run or a partial one (--only) must not replace the full comparison's results in docs/.
    scratch = args.quick or bool(args.only)
    results_path = args.results or (args.workdir / "results.json" if scratch else REPO / "docs" / "performance.json")
    docs = args.docs or (args.workdir / "docs" if scratch else REPO / "docs")

    if not args.report_only:
        scale = args.scale if not args.quick else min(args.scale, 0.01)
        workloads = select(matrix(scale, quick=args.quick), args.only)
        if not workloads:
            p.error(f"--only {args.only}: no workload id contains any of these")
        brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
        args.workdir.mkdir(parents=True, exist_ok=True)
        runner.log(f"machine limits (scale {scale}) ...")
        # the kernel floors' sockets get the brokers' buffer sizes (socket.send/receive.buffer.bytes, the same)
        limits = machine.measure(args.workdir, scale=scale if not args.quick else 0.05,
                                 socket_buffer_bytes=int(shared_properties()["socket.receive.buffer.bytes"]))
        runner.log(", ".join(f"{k}={v:.2f}" for k, v in limits.items() if k.endswith(("gbps", "per_gb"))))
        klog_extra = dict(kv.split("=", 1) for kv in args.klog_property)
        sessions = []
        for run in range(1, args.runs + 1):
            sessions += runner.paired_run(brokers, workloads, args.workdir, run,
                                          warmup_records=max(2000, int(200_000 * scale)),
                                          extra_properties={"klog": klog_extra})
        data = {
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python -m sidebyside", *(argv if argv is not None else sys.argv[1:])]),
            "mode": "paired", "runs": args.runs, "scale": scale, "quick": args.quick, "klog_properties": klog_extra,
            "machine": limits,
            "workloads": [w.describe() for w in workloads],
            "sessions": sessions,
        }
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(data, indent=1) + "\n")
        runner.log(f"results: {results_path}")
    data = json.loads(results_path.read_text())
    md = report.write(data, docs)
    runner.log(f"report: {md}")
    failed = [f"{s['broker']} run {s['run']}" for s in data["sessions"] if "error" in s["info"]]
    if failed:
        runner.log("sessions that failed: " + ", ".join(failed))
    return 0



def _cluster_comparison(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--cluster 3``: the paired 3-node comparison; results to docs/performance-cluster.json (WORKDIR with
    --quick or --only: the measurements named, e.g. ``--only failover``) and its section of performance.md."""
    scale = args.scale if not args.quick else min(args.scale, 0.02)
    docs = args.docs or (args.workdir / "docs" if args.quick or args.only else REPO / "docs")
    results_path = args.results or docs / cluster.JSON_NAME
    if not args.report_only:
        systems = [b.strip() for b in args.brokers.split(",") if b.strip()]
        args.workdir.mkdir(parents=True, exist_ok=True)
        sessions = []
        for run in range(1, args.runs + 1):
            sessions += cluster.paired_cluster_run(systems, args.workdir, run, scale, together=args.together,
                                                   only=args.only)
        data = {
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python -m sidebyside", *(argv if argv is not None else sys.argv[1:])]),
            "mode": "paired-cluster", "together": args.together, "nodes": cluster.NODES, "runs": args.runs,
            "scale": scale,
            "quick": args.quick, "properties": {k: str(v) for k, v in cluster.cluster_properties().items()},
            "sessions": sessions,
        }
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(data, indent=1) + "\n")
        runner.log(f"results: {results_path}")
    data = json.loads(results_path.read_text())
    docs.mkdir(parents=True, exist_ok=True)
    section = cluster.markdown(data)
    cluster.write_section(docs / "performance.md", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
