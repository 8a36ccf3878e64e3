#!/usr/bin/env python3
"""docs/LANGUAGE-REFERENCE.md against the compiler's own tables, so that a new built-in,
graph operation, launch key, keyword or type without documentation fails CI.

usage: check_reference.py SOURCE_DIR

Each name is read from the table that defines it and must appear in a code span of the
reference section that lists it:
  kernel built-ins  frontend/lower_builtins.c builtins[], ir/elementwise.def   section 5.1
  graph operations  frontend/graph.c graph_builtins[]                          section 7.2
  launch keys       ir/launch.def                                              section 3.3
  keywords          frontend/lexer.l                                           section 1
  types             ir/ir.h IR_ELEMS                                           section 2.1
Also: no doc in docs/ (but STATUS.md, a log) or README.md cites the old LANGUAGE.md,
which a clone does not have, and every link to a reference anchor and every "reference
section N" names a heading that exists."""
import os
import re
import sys


def read(src, path):
    with open(os.path.join(src, path), encoding="utf-8") as f:
        return f.read()


def table(text, start):
    """The text of the C array that begins at `start`, up to its closing '};'."""
    i = text.index(start)
    return text[i:text.index("};", i)]


def kernel_builtins(src):
    t = table(read(src, "frontend/lower_builtins.c"), "static const Builtin builtins[]")
    names = re.findall(r'^\s*\{"(\w+)"', t, re.M)    # a row's first string (not its parameters)
    names += re.findall(r'\b(?:ATOMIC|MINMAX|ARGM|SCAN)\("(\w+)"', t)
    if '#include "ir/elementwise.def"' in t:
        names += re.findall(r'^EW\("(\w+)"', read(src, "ir/elementwise.def"), re.M)
    return names


def graph_builtins(src):
    g = read(src, "frontend/graph.c")
    t = table(g, "static const Builtin graph_builtins[]")
    names = re.findall(r'^\s*\{"(\w+)"', t, re.M)
    if '#include "ir/elementwise.def"' in t:
        names += re.findall(r'^EW\("(\w+)"', read(src, "ir/elementwise.def"), re.M)
    return names


def launch_keys(src):
    return re.findall(r"^LAUNCH\(\s*\w+,\s*(\w+),", read(src, "ir/launch.def"), re.M)


def keywords(src):
    return re.findall(r'^"(\w+)"\s+\{ RET\(KW_', read(src, "frontend/lexer.l"), re.M)


def types(src):
    return [n for n in re.findall(r'X\(\w+,\s*"(\w+)"', read(src, "ir/ir.h")) if n != "ptr"]


def sections(doc):
    """{number: text} for every '## N.' and '### N.M' heading of the reference."""
    out, cur = {}, None
    for line in doc.split("\n"):
        m = re.match(r"#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if m:
            cur = m.group(1)
            out[cur] = ""
        elif cur:
            out[cur] += line + "\n"
    return out


def code_names(text):
    """Identifiers inside code spans and fenced blocks; `atomic_add/max/min` also
    gives atomic_max and atomic_min."""
    code = re.findall(r"```.*?```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
    names = set()
    for c in code:
        for group in re.findall(r"\w+(?:/\w+)*", c):
            parts = group.split("/")
            names.update(parts)
            prefix = parts[0][: parts[0].rfind("_") + 1] if "_" in parts[0] else ""
            names.update(prefix + p for p in parts[1:] if prefix)
    return names


def anchor(heading):
    """GitHub's anchor of a heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def main():
    src = sys.argv[1]
    doc = read(src, "docs/LANGUAGE-REFERENCE.md")
    secs = sections(doc)
    errors = []
    checks = [("kernel built-in", kernel_builtins(src), "5.1"),
              ("graph operation", graph_builtins(src), "7.2"),
              ("launch key", launch_keys(src), "3.3"),
              ("keyword", keywords(src), "1"),
              ("type", types(src), "2.1")]
    for what, names, sec in checks:
        if not names:
            errors.append("found no %ss: did the table move? (update tests/docs/check_reference.py)" % what)
        if sec not in secs:
            errors.append("docs/LANGUAGE-REFERENCE.md has no section %s" % sec)
            continue
        have = code_names(secs[sec])
        for n in sorted(set(names)):
            if n not in have:
                errors.append("%s '%s' is not documented in section %s of docs/LANGUAGE-REFERENCE.md"
                              % (what, n, sec))

    anchors = {anchor(h) for h in re.findall(r"^#+ (.*)$", doc, re.M)}
    docs = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(src, "docs")))
                            if f.endswith(".md")]
    for path in docs:
        text = read(src, path)
        if path != "docs/STATUS.md":   # a log of what was done, kept as written
            for m in re.finditer(r"LANGUAGE\.md", text):
                if not text[:m.start()].endswith("-REFERENCE") and "v0" not in text[m.start() - 3:m.start()]:
                    line = text.count("\n", 0, m.start()) + 1
                    errors.append("%s:%d cites LANGUAGE.md, which is not in the repository; "
                                  "cite docs/LANGUAGE-REFERENCE.md's section" % (path, line))
        own = r"\]\(#([\w\-]+)\)" if path == "docs/LANGUAGE-REFERENCE.md" else r"$^"
        for m in list(re.finditer(r"LANGUAGE-REFERENCE\.md#([\w\-]+)", text)) + list(re.finditer(own, text)):
            if m.group(1) not in anchors:
                line = text.count("\n", 0, m.start()) + 1
                errors.append("%s:%d links to #%s, no heading of docs/LANGUAGE-REFERENCE.md"
                              % (path, line, m.group(1)))
        for m in re.finditer(r"LANGUAGE-REFERENCE(?:\.md)?\]?(?:\([^)]*\))?,? sections? (\d+(?:\.\d+)?)", text):
            if m.group(1) not in secs:
                line = text.count("\n", 0, m.start()) + 1
                errors.append("%s:%d cites section %s of docs/LANGUAGE-REFERENCE.md, which has none"
                              % (path, line, m.group(1)))
    for e in errors:
        print("error: " + e)
    n = sum(len(set(c[1])) for c in checks)
    print("%d names checked, %d errors" % (n, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
