"""What the scripts that write BENCHMARKS.md share: the CPU's name, and replacing one generated
section (between `<!-- NAME: begin -->` and `<!-- NAME: end -->`) while keeping the others."""
import os
import re

PATH = "BENCHMARKS.md"
# Any generated section: scripts/bench rewrites the file and keeps these as they are.
SECTION = re.compile(r"<!-- ([^>]+?): begin -->.*?<!-- \1: end -->", re.S)


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def sections(text):
    """The generated sections of a BENCHMARKS.md text, in order."""
    return [m.group(0) for m in SECTION.finditer(text)]


def write_section(name, section):
    """Replaces the section `name` of BENCHMARKS.md with `section` (its markers included), or
    appends it."""
    begin, end = "<!-- %s: begin -->" % name, "<!-- %s: end -->" % name
    old = open(PATH).read() if os.path.exists(PATH) else ""
    section = section.rstrip("\n")
    if begin in old and end in old:
        new = old[:old.index(begin)] + section + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    open(PATH, "w").write(new)
