#!/usr/bin/env python3
"""snippets.py: keeps docs/clients.md and the code test/clients/run runs
the same.

  snippets.py check       every block of docs/clients.md that follows a
                          marker <!-- snippet: PATH#NAME --> is, character for
                          character (after removing the indentation common to
                          its lines and blank lines around it), the region
                          NAME of test/clients/PATH,
                          written between the comments `snippet: NAME` and
                          `end snippet`; and every region of those files
                          appears in the guide exactly once. Exits 1 with a
                          diff otherwise.
  snippets.py usage-sql   prints the blocks of docs/usage.md whose objects the
                          drivers call (the HTTP handler and the stored
                          procedure), for test/clients/run to create them.
"""
import difflib
import pathlib
import re
import sys
import textwrap

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GUIDE = ROOT / "docs" / "clients.md"
SOURCES = ("*.js", "*.java", "*.py", "*.go", "*.pl", "*.sql")

MARKER = re.compile(r"<!-- snippet: (\S+)#(\S+) -->\n```[a-z]*\n(.*?)```", re.S)
BEGIN = re.compile(r"^\s*(?://|#|--) snippet: (\S+)\s*$")
END = re.compile(r"^\s*(?://|#|--) end snippet\s*$")


def tidy(text):
    """The text without its common indentation and surrounding blank lines."""
    return textwrap.dedent(text).strip("\n") + "\n"


def regions(path):
    """{name: text} of the regions in one source file."""
    found, name, lines = {}, None, []
    for number, line in enumerate(path.read_text().splitlines(keepends=True), 1):
        if name is None:
            m = BEGIN.match(line)
            if m:
                name, lines = m.group(1), []
                if name in found:
                    sys.exit(f"{path}:{number}: region {name!r} twice")
        elif END.match(line):
            found[name] = tidy("".join(lines))
            name = None
        else:
            lines.append(line)
    if name is not None:
        sys.exit(f"{path}: region {name!r} has no end")
    return found


def check():
    code = {}
    for pattern in SOURCES:
        for path in sorted(HERE.rglob(pattern)):
            if "node_modules" in path.parts:
                continue
            for name, text in regions(path).items():
                code[(path.relative_to(HERE).as_posix(), name)] = text
    problems, seen = [], {}
    guide = GUIDE.read_text()
    for m in MARKER.finditer(guide):
        ref = (m.group(1), m.group(2))
        seen[ref] = seen.get(ref, 0) + 1
        shown = tidy(m.group(3))
        if ref not in code:
            problems.append(f"docs/clients.md shows {ref[0]}#{ref[1]}, which test/clients/{ref[0]} does not have")
        elif shown != code[ref]:
            diff = difflib.unified_diff(code[ref].splitlines(), shown.splitlines(),
                                        f"test/clients/{ref[0]}#{ref[1]}", "docs/clients.md", lineterm="")
            problems.append(f"docs/clients.md differs from test/clients/{ref[0]}#{ref[1]}:\n" + "\n".join(diff))
    if guide.count("<!-- snippet:") != sum(seen.values()):
        problems.append("docs/clients.md has a snippet marker not followed by a fenced block")
    for ref in sorted(code):
        if seen.get(ref, 0) != 1:
            problems.append(f"test/clients/{ref[0]}#{ref[1]} appears {seen.get(ref, 0)} times in docs/clients.md, not once")
    for p in problems:
        print(f"snippets: {p}", file=sys.stderr)
    print(f"snippets: {len(code)} regions, {len(problems)} problem(s)")
    return 1 if problems else 0


def usage_sql():
    usage = (ROOT / "docs" / "usage.md").read_text()
    wanted = ("CREATE FUNCTION create_payment", "CREATE PROCEDURE transfer")
    blocks = [b for b in re.findall(r"```sql\n(.*?)```", usage, re.S) if any(w in b for w in wanted)]
    if len(blocks) != len(wanted):
        sys.exit("snippets: docs/usage.md no longer has the HTTP handler and the stored procedure blocks")
    print("\n".join(blocks))
    return 0


if __name__ == "__main__":
    commands = {"check": check, "usage-sql": usage_sql}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: {sys.argv[0]} check|usage-sql")
    sys.exit(commands[sys.argv[1]]())
