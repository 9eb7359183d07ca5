#!/usr/bin/env python3
"""Groups a `perf record -g` profile of the server by where the CPU went:
the model (BLAS and ATen), the REST request's JSON decode, the answer's
encoding, Beast's HTTP parsing and writing, Asio's event loop, gRPC,
protobuf and Abseil, the kernel (sockets, syscalls, scheduling), libc
(allocation and copies), locks and hand-off, and the rest; then the top
symbols of each group.

    perf record -F 999 -g -p SERVER_PID -o rest.perf.data -- sleep 11 &
    h2load ... (the load, for 10 s)
    bench/perf_categories.py rest.perf.data

The groups are read from symbol and library names (a symbol perf could not
name goes to its library's group, or "other"), so they are a reading of
the profile, not an exact account: say which build and load made it.
"""
import collections
import re
import subprocess
import sys

MODEL, JSON_DECODE, ANSWER, BEAST, ASIO, LIBRARIES, KERNEL, LIBC, LOCKS, OTHER = GROUPS = [
    "model (BLAS, ATen ops)", "request JSON decode", "answer encode", "HTTP parse/write (Beast)", "Asio event loop",
    "gRPC, protobuf, Abseil (libraries)", "kernel (sockets, syscalls, scheduling)", "libc (malloc, free, copies)",
    "locks, atomics, hand-off", "other"]


def group_of(dso, kind, symbol):
    """The group of one profile line; the first rule that matches wins."""
    if re.search(r"openblas|libtorch|libc10|libgomp", dso) or symbol.startswith(("at::", "c10::", "torch::")):
        return MODEL
    if kind == "k" or dso.startswith("[kernel") or "vdso" in dso:
        return KERNEL
    if re.search(r"ScanJson|ReadNumber|from_chars|DecodeNumericData|FindNumericData|strtod|json_abi.*(parse|lexer)|"
                 r"DecodeRest|ParseBoundedJson", symbol):
        return JSON_DECODE
    if re.search(r"dump|to_chars|serializer|Encode|WriteRest|ToAnswer", symbol):
        return ANSWER
    if "beast" in symbol:
        return BEAST
    if "asio" in symbol:
        return ASIO
    if re.search(r"libgrpc|libgpr|libabsl|libprotobuf|libupb", dso) or symbol.startswith(
            ("grpc", "absl::", "google::protobuf")):
        return LIBRARIES
    if re.search(r"malloc|free|operator new|operator delete|_int_|tcache|memcpy|memmove", symbol) or (
            dso.startswith("libc") and symbol.startswith("0x")):
        return LIBC
    if re.search(r"[Mm]utex|futex|atomic|_Sp_counted|condition_variable|pthread|notify", symbol):
        return LOCKS
    return OTHER


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: perf_categories.py PERF_DATA")
    report = subprocess.run(["perf", "report", "-i", sys.argv[1], "--no-children", "--sort", "dso,sym", "--stdio",
                             "-g", "none"], capture_output=True, text=True, check=True).stdout
    shares = collections.OrderedDict((g, 0.0) for g in GROUPS)
    top = collections.defaultdict(float)
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        share, dso, kind, symbol = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
        g = group_of(dso, kind, symbol)
        shares[g] += share
        top[(g, symbol[:60])] += share
    for g, share in shares.items():
        print("%-40s %5.1f%%" % (g, share))
    print()
    for g in GROUPS:
        items = sorted(((v, s) for (gg, s), v in top.items() if gg == g), reverse=True)[:3]
        if items:
            print("%s: %s" % (g, "; ".join("%s %.1f%%" % (s, v) for v, s in items)))


if __name__ == "__main__":
    main()
