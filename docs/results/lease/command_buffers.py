"""command_buffers.py FILE...: what XLA launches for the act. For an optimised HLO text file, the ENTRY
computation's instructions by opcode and fusion kind (each fusion is a kernel). For a thunk sequence
(`*thunk_sequence*.txt`, where XLA's command buffers, its CUDA graphs, are formed), the thunks by kind
and nesting depth (a thunk inside a command buffer is indented under it), then the file's first lines,
so that a format this does not know still shows itself."""

import collections
import re
import sys

INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S.*?\s([a-z][\w\-]*)\(")
FUSION_KIND = re.compile(r'kind=(k\w+)|"kind":"(\w+)"')
THUNK_KIND = re.compile(r"\b(k[A-Z]\w*)\b")
SKIPPED = ("parameter", "get-tuple-element", "tuple", "constant", "bitcast")


def hlo_summary(text: str) -> list[str]:
    """ENTRY's instructions by opcode, fusions also by kind."""
    counts, inside = collections.Counter(), False
    for line in text.splitlines():
        if line.startswith("ENTRY"):
            inside = True
        elif inside and line.startswith("}"):
            break
        elif inside and (match := INSTRUCTION.match(line)) and match.group(1) not in SKIPPED:
            kinds = [a or b for a, b in FUSION_KIND.findall(line)]
            counts[" ".join([match.group(1), *kinds])] += 1
    return [f"{sum(counts.values())} instructions in ENTRY"] + [f"  {k:50s} {n}" for k, n in counts.most_common()]


def thunk_summary(text: str) -> list[str]:
    """Thunks by (indentation depth, kind), and the first lines."""
    counts = collections.Counter()
    lines = text.splitlines()
    for line in lines:
        match = THUNK_KIND.search(line)
        if match:
            counts[(len(line) - len(line.lstrip()), match.group(1))] += 1
    out = [f"{sum(counts.values())} thunk lines"] + [f"  indent {d:3d} {k:40s} {n}" for (d, k), n in sorted(counts.items())]
    return out + ["first lines:"] + [f"  {line[:200]}" for line in lines[:40]]


def main(paths: list[str]) -> None:
    for path in paths:
        text = open(path).read()
        summary = thunk_summary(text) if "thunk_sequence" in path else hlo_summary(text)
        print("\n".join([path, *summary]))


if __name__ == "__main__":
    main(sys.argv[1:])
