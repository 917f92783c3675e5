#!/usr/bin/env python3
"""The folder-level include graph of lib/, and what breaks DESIGN.md's "arrows point down".

A folder is a layer: the directory of a file relative to lib/ ("ops/cuda", "comm/nccl",
"device"). An edge A -> B means some file in A includes "B/<file>" with quotes. Prints
  - every edge with the number of includes behind it (and, with --files, which ones),
  - folder-level cycles (strongly connected components with more than one folder; a
    parent and its own subfolder count as one layer, so "comm" <-> "comm/gloo" is fine),
  - source files under lib/ that share a basename (two "export.cpp" confuse readers,
    debuggers and `file(GLOB)` lists alike).
Exit status 1 when there is a cycle or a shared basename, so CI can run it.

Usage: scripts/dev/include_graph.py [--root REPO] [--files] [--dot]
"""
import argparse
import collections
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}


def layer_of(folder: str) -> str:
    """Subfolders belong to their top folder's layer for cycle purposes (comm/gloo is comm)."""
    return folder.split("/")[0]


def collect(lib: pathlib.Path):
    edges = collections.defaultdict(list)  # (from_folder, to_folder) -> ["file -> include"]
    folders = set()
    for path in sorted(lib.rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(lib)
        src = str(rel.parent)
        folders.add(src)
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            target = lib / inc
            if not target.exists():
                continue  # a system header or one relative to the including file
            dst = str(pathlib.PurePosixPath(inc).parent)
            if dst != src:
                edges[(src, dst)].append(f"{rel} -> {inc}")
    return folders, edges


def strongly_connected(nodes, adj):
    """Tarjan's algorithm; returns the components with more than one node."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[2], type=pathlib.Path)
    ap.add_argument("--files", action="store_true", help="list the includes behind each edge")
    ap.add_argument("--dot", action="store_true", help="print the graph in Graphviz dot instead")
    args = ap.parse_args()
    lib = args.root / "lib"
    folders, edges = collect(lib)

    if args.dot:
        print("digraph lib {")
        for (a, b), why in sorted(edges.items()):
            print(f'  "{a}" -> "{b}" [label={len(why)}];')
        print("}")
        return 0

    print("folder include graph of lib/ (from -> to: includes)")
    by_src = collections.defaultdict(list)
    for (a, b), why in sorted(edges.items()):
        by_src[a].append((b, why))
    for src in sorted(folders):
        targets = by_src.get(src, [])
        print(f"  {src:<12} -> " + (", ".join(f"{b} ({len(w)})" for b, w in targets) or "(nothing)"))
        if args.files:
            for _, why in targets:
                for line in why:
                    print(f"      {line}")

    bad = False
    layer_adj = collections.defaultdict(set)
    for a, b in edges:
        if layer_of(a) != layer_of(b):
            layer_adj[layer_of(a)].add(layer_of(b))
    layers = {layer_of(f) for f in folders}
    cycles = strongly_connected(layers, layer_adj)
    # Within one layer, a parent and a subfolder may include each other (comm/gloo implements
    # comm's interface), but two sibling subfolders must not form a loop.
    folder_adj = collections.defaultdict(set)
    for a, b in edges:
        folder_adj[a].add(b)
    for comp in strongly_connected(folders, folder_adj):
        if len({layer_of(f) for f in comp}) == 1 and not any("/" not in f for f in comp):
            cycles.append(comp)
    print("\nfolder-level cycles:", "none" if not cycles else "")
    for comp in cycles:
        bad = True
        print("  " + " <-> ".join(comp))
        members = set(comp)
        for (a, b), why in sorted(edges.items()):
            inside = (a in members and b in members) or (
                layer_of(a) in members and layer_of(b) in members and layer_of(a) != layer_of(b))
            if inside:
                print(f"      {a} -> {b}: " + "; ".join(why[:2]) + (" ..." if len(why) > 2 else ""))

    names = collections.defaultdict(list)
    for path in sorted(lib.rglob("*")):
        if path.suffix in SUFFIXES and path.is_file():
            names[path.name].append(str(path.relative_to(args.root)))
    shared = {n: p for n, p in names.items() if len(p) > 1}
    print("\nfiles sharing a basename:", "none" if not shared else "")
    for n, paths in sorted(shared.items()):
        bad = True
        print(f"  {n}: " + ", ".join(paths))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
