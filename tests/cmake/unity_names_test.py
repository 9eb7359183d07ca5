#!/usr/bin/env python3
"""The names a batch of the unity build (cmake/unity_build.cmake) must not
share: two files compiled as one translation unit that each define the same
name at namespace scope in their anonymous namespace, or as `static`,
collide there, or worse, overload each other: a call in the later file may
then pick the earlier file's function, and nothing fails to compile. So no
two files of one target may define the same namespace-scope name.

Reads the batches of a build folder (BUILD/unity/TARGET_N.cc), and in each
target's files the definitions at namespace scope, which this project writes
at the start of a line (namespaces are not indented): types, functions,
variables and constants. Names defined in a header are not counted (a
header is included once per batch; its include guard sees to it).

  tests/cmake/unity_names_test.py BUILD_DIR [SOURCE_DIR]
  tests/cmake/unity_names_test.py --self-test
Exit status 1 and one line per shared name when any is found."""
import collections
import os
import re
import sys

# A definition at namespace scope, at the start of its line: a type, or a
# function or variable whose name is followed by `(`, `=`, `{`, `[` or `;`.
TYPE = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)\s*(?:final\s*)?[:{]")
USING = re.compile(r"^using\s+(\w+)\s*=")
DECL = re.compile(r"^(?!(?:namespace|return|using|typedef|template|TEST|TEST_F|TEST_P|INSTANTIATE|MATCHER|ACTION|"
                  r"extern|public|private|protected|case|default|if|for|while|switch|else|do)\b)"
                  r"[A-Za-z_][\w:<>,\s\*&\[\]]*?[\s\*&](\w+)\s*(?:\(|=|\{|\[|;)")
IGNORED = {"main", "operator", "LLVMFuzzerTestOneInput"}


RAW_STRING = re.compile(r'R"([^(\s]*)\((?:.|\n)*?\)\1"')


def names_in(text):
    """{name: what} for the namespace-scope names a .cc file defines (line
    by line: this project's style puts each at the start of its line), raw
    string literals (TorchScript sources in tests) left out. `what` is the
    aliased type for a `using` alias (two files may alias a name to the
    same type: that is a redeclaration, not a collision), else None."""
    found = {}
    for line in RAW_STRING.sub('""', text).splitlines():
        if not line or line[0] in " \t#/}*)" or line.startswith("namespace"):
            continue
        for pattern in (TYPE, USING, DECL):
            m = pattern.match(line)
            if m and m.group(1) not in IGNORED and not m.group(1).startswith("operator"):
                found[m.group(1)] = line.split("=", 1)[1].strip() if pattern is USING else None
                break
    return found


def targets_of(build_dir):
    """{target: [source, ...]} from the batch files' #include lines."""
    batches = os.path.join(build_dir, "unity")
    targets = collections.defaultdict(list)
    for name in sorted(os.listdir(batches)):
        m = re.match(r"(.+)_\d+\.cc$", name)
        if not m:
            continue
        with open(os.path.join(batches, name)) as f:
            targets[m.group(1)] += re.findall(r'^#include "([^"]+)"', f.read(), re.M)
    return targets


def shared_names(sources, read):
    """[(name, [file, file, ...]), ...] for names two files define."""
    where = collections.defaultdict(list)
    for source in sources:
        for name, what in names_in(read(source)).items():
            where[name].append((source, what))
    shared = []
    for name, defs in where.items():
        if len(defs) > 1 and not (defs[0][1] is not None and all(what == defs[0][1] for _, what in defs)):
            shared.append((name, [source for source, _ in defs]))
    return sorted(shared)


def self_test():
    files = {
        "a.cc": "namespace {\nstruct Row {\n};\nint Helper(int x) {\n  return x;\n}\n"
                "constexpr int kLimit = 3;\n}  // namespace\nTEST(A, B) {\n  int local = 1;\n}\n",
        "b.cc": "namespace {\nstruct Row {\n};\nint Helper(double x);\nstatic const char* kName = \"b\";\n"
                "}\nvoid Public();\n",
        "c.cc": "namespace {\nstruct RowOfC {\n};\nint kLimit2 = 4;\nusing Clock = std::chrono::steady_clock;\n"
                "const char* kScript = R\"(\ndef forward(self, x):\n)\";\n}\nTEST(A, C) {\n}\n",
        "d.cc": "using Clock = std::chrono::steady_clock;\nconst char* kOther = R\"js(\ndef forward(x)\n)js\";\n",
    }
    got = shared_names(sorted(files), files.get)
    want = [("Helper", ["a.cc", "b.cc"]), ("Row", ["a.cc", "b.cc"])]
    if got != want:
        print("self-test: found %s, expected %s" % (got, want))
        return 1
    print("self-test: the shared names of four made-up files found")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    build_dir = sys.argv[1]
    source_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))

    def read(source):
        with open(os.path.join(source_dir, source), encoding="utf-8", errors="replace") as f:
            return f.read()

    targets = targets_of(build_dir)
    problems = 0
    for target, sources in sorted(targets.items()):
        for name, files in shared_names(sources, read):
            print("%s: %s is defined in %s" % (target, name, ", ".join(files)))
            problems += 1
    print("unity names: %d target(s), %d file(s), %d shared name(s)" %
          (len(targets), sum(len(s) for s in targets.values()), problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
