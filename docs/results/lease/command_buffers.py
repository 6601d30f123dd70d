"""command_buffers.py HLO...: for each XLA-optimised HLO text file, the ENTRY computation's instructions
that run inside a command buffer (a CUDA graph: a `call` or `command_buffer` whose callee is a command
buffer computation) and the ones left outside, each launched on its own, counted by opcode."""

import collections
import re
import sys

INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S.*?\s([a-z][\w\-]*)\(")


def entry_lines(text: str) -> list[str]:
    """The lines of the ENTRY computation's body."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("ENTRY"):
            inside = True
        elif inside and line.startswith("}"):
            break
        elif inside:
            lines.append(line)
    return lines


def main(paths: list[str]) -> None:
    for path in paths:
        inside, outside = collections.Counter(), collections.Counter()
        for line in entry_lines(open(path).read()):
            match = INSTRUCTION.match(line)
            if not match:
                continue
            opcode = match.group(1)
            if "command_buffer" in line:
                inside[opcode] += 1
            elif opcode not in ("parameter", "get-tuple-element", "tuple", "constant", "bitcast"):
                outside[opcode] += 1
        print(f"{path}: {sum(inside.values())} command buffer call(s); outside them {sum(outside.values())}:")
        for opcode, count in outside.most_common(12):
            print(f"  {opcode:28s} {count}")


if __name__ == "__main__":
    main(sys.argv[1:])
