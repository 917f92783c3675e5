#!/usr/bin/env python3
"""Catch2 test names that ctest can run.

catch_discover_tests turns each TEST_CASE name into a ctest entry through a CMake list: a
';' splits a name into two tests that match nothing, and an unbalanced '[' or ']' makes
CMake swallow every later name into one entry. Either way the test runs zero cases and
passes (Catch2 says "No tests ran"). tests/CMakeLists.txt also passes --warn NoTests so such
an entry fails; this check names the test and says what to change before it gets that far.

Usage: tests/lint/check_test_names.py [ROOT]   (exit 1 listing every offending name)
"""
import pathlib
import re
import sys

# TEST_CASE( or TEST_CASE_METHOD(Fixture, followed by the name's string literal, which may
# start on the next line.
NAME = re.compile(r'TEST_CASE(?:_METHOD)?\s*\(\s*(?:\w+\s*,\s*)?"((?:[^"\\]|\\.)*)"', re.S)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = []
    for path in sorted((root / "tests").rglob("*.cpp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in NAME.finditer(text):
            name = m.group(1)
            found = sorted(set(c for c in name if c in ";[]"))
            if found:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path.relative_to(root)}:{line}: test name {name!r} contains "
                           f"{' '.join(found)}: ctest cannot run it (use ',' or ':' instead of ';', "
                           f"and no brackets in names; tags go in the second argument)")
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"check_test_names: every TEST_CASE name under {root / 'tests'} is safe for ctest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
