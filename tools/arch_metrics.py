"""Figures on klog's shape, for the architecture notes: lines per folder, import arrows between the layers,
import circles, upward arrows, untyped handler parameters and the largest files.

    python tools/arch_metrics.py            # a table on stdout
    python tools/arch_metrics.py --json     # the same figures as JSON

It reads the source tree (``klog/`` beside this file's folder) with grimp, so it needs no build; the layer order is
the one .importlinter enforces, lowest first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
#: Lowest first: a module may import from its own floor or below, never above.
LAYERS = (
    ("klog.protocol", "klog._native", "klog.records", "klog.partitioner"),
    ("klog.metadata",),
    ("klog.client", "klog"),  # the package's own __init__ is the client's facade (klog.Producer, ...)
    ("klog.controller", "klog.spark", "klog.aio"),
    ("klog.broker",),
    ("klog.cli", "klog.console", "klog.embedded", "pyspark_klog"),
    ("klog.testing",),
)
UNTYPED_PARAM = re.compile(r"\b(broker|request|state)\s*:\s*Any\b")


def floor_of(module: str) -> int | None:
    for floor, packages in enumerate(LAYERS):
        if any(module == p or (p != "klog" and module.startswith(p + ".")) for p in packages):
            return floor
    return None


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the circles of the module graph (components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def measure() -> dict[str, object]:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("klog", cache_dir=None)
    modules = sorted(m for m in graph.modules if m.startswith("klog"))
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("klog")} for m in modules}
    arrows: Counter[str] = Counter()
    upward: list[str] = []
    for importer, imported_set in edges.items():
        for imported in imported_set:
            a, b = package_of(importer), package_of(imported)
            if a != b:
                arrows[f"{a} -> {b}"] += 1
            fa, fb = floor_of(importer), floor_of(imported)
            if fa is not None and fb is not None and fb > fa:
                upward.append(f"{importer} -> {imported}")
    lines: Counter[str] = Counter()
    sizes: list[tuple[int, str]] = []
    for path in sorted((ROOT / "klog").rglob("*.py")):
        count = len(path.read_text(encoding="utf-8").splitlines())
        rel = path.relative_to(ROOT)
        folder = str(rel.parent) if rel.parent != Path("klog") else "klog (top)"
        lines[folder] += count
        sizes.append((count, str(rel)))
    untyped = 0
    for path in (ROOT / "klog" / "broker" / "handlers").glob("*.py"):
        untyped += len(UNTYPED_PARAM.findall(path.read_text(encoding="utf-8")))
    return {
        "lines_per_folder": dict(sorted(lines.items())),
        "lines_total": sum(lines.values()),
        "arrows": {
            "klog.broker -> klog.controller": arrows["klog.broker -> klog.controller"],
            "klog.controller -> klog.broker": arrows["klog.controller -> klog.broker"],
            "klog.spark -> klog.protocol": arrows["klog.spark -> klog.protocol"],
            "klog.spark -> klog.client": arrows["klog.spark -> klog.client"],
        },
        "circles": strongly_connected(edges),
        "upward": sorted(upward),
        "untyped_handler_params": untyped,
        "files_over_1000_lines": [f"{p} ({n})" for n, p in sorted(sizes, reverse=True) if n > 1000],
        "largest_files": [f"{p} ({n})" for n, p in sorted(sizes, reverse=True)[:8]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    figures = measure()
    if parser.parse_args().json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        elif isinstance(value, list):
            print(f"{key}: {len(value)}")
            for item in value:
                print(f"  {' -> '.join(item) if isinstance(item, list) else item}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
