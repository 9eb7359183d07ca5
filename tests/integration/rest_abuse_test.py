#!/usr/bin/env python3
"""Abusive REST bodies against the real server, with a well-behaved client
calling the whole time (every answer within 2 s) and the server's memory
watched: resident before, at peak and after, against the in-flight budget
plus a stated margin.

- 16 MiB of '[': refused (400, "nested") before a parse tree is built; a
  tree some 75 times the body was what it used to cost.
- A flat JSON array of 4 million zeros under a 128 MiB in-flight budget:
  its parse tree (about 64 bytes per value, some 256 MiB) does not fit and
  the call is refused (429, "parse tree") before parsing; under a budget it
  fits, it is served.
- A string bomb: a million one-byte strings (BYTES, as JSON strings and as
  the binary extension's 4-byte lengths) to a model taking
  List[str] (and answering their count), three at once: each string costs the server far
  more than its 1-5 bytes on
  the wire (its parse tree node, its place in the string tensor), which the
  budget counts; those that do not fit are refused (429), and RSS stays
  within the budget plus the margin.
- Memory comes back: after the spikes, with nothing in flight, the server
  returns freed memory to the system (RSS falls back near where it began).
- The server exits 0 on SIGTERM at the end.
- With tokens: a request without one is refused (401) from its head alone,
  before its body is read: a client announcing a 50 MiB body and sending
  none gets its answer at once, instead of the server waiting to read it.
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import (Server, make_demo_models, expect_budget_back, fail, memory_bounds_apply, required_arguments, reset_peak,  # noqa: E402
                    rss_kib, write_count_strings)

BUDGET_MIB = 128
MARGIN_MIB = 160  # the 16-64 MiB bodies themselves (received, then copied once), allocator slack


def post(http, path, body, timeout=120, headers=None):
    req = urllib.request.Request("http://%s%s" % (http, path), data=body,
                                 headers=headers or {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    args = required_arguments("--server", "--make-models")
    work = tempfile.mkdtemp(prefix="ig_rest_abuse_")
    server = None
    stop = threading.Event()
    try:
        models = os.path.join(work, "models")
        make_demo_models(args.make_models, models, test_models=False)
        # count_strings: TYPE_STRING in (List[str]), the count out, so that
        # the string bombs below measure what taking a million strings in
        # costs (an answer of a million strings is not charged to the
        # budget: a known gap, the same for every answer).
        write_count_strings(os.path.join(models, "count_strings"))
        server = Server(args.server, ["--model-repository=" + models, "--max-inflight-bytes=%dMiB" % BUDGET_MIB,
                                      "--max-receive-bytes=96MiB", "--repository-poll-interval=0"],
                        os.path.join(work, "server.log"))
        http = server.http_address
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen("http://%s/v2/health/ready" % http, timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.time() > deadline:
                fail("server never became ready")
            time.sleep(0.05)
        pid = server.proc.pid
        row = json.dumps({"inputs": [{"name": "x", "shape": [1, 256], "datatype": "FP32",
                                      "data": [0.5] * 256}]}).encode()
        status, _ = post(http, "/v2/models/mlp/infer", row)
        if status != 200:
            fail("warm-up request: %d" % status)

        # A well-behaved client, the whole time: its answers bounded by 2 s or
        # ten times its slowest before the abuse, whichever is more (a
        # sanitizer build on a loaded machine is slow before any abuse).
        slowest_before = 0.0
        for _ in range(20):
            start = time.time()
            post(http, "/v2/models/mlp/infer", row)
            slowest_before = max(slowest_before, time.time() - start)
        bound_s = max(2.0, 10 * slowest_before)
        print("the well-behaved client's slowest answer before the abuse: %.3f s; bound %.1f s" %
              (slowest_before, bound_s))
        slow = []
        errors = []

        def good_client():
            while not stop.is_set():
                start = time.time()
                try:
                    status, _ = post(http, "/v2/models/mlp/infer", row, timeout=30)
                    if status != 200:
                        errors.append(status)
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))
                took = time.time() - start
                if took > bound_s:
                    slow.append(took)
                time.sleep(0.02)

        client = threading.Thread(target=good_client, daemon=True)
        client.start()
        time.sleep(0.5)
        before = rss_kib(pid)
        reset_peak(pid)

        deep = b"[" * (16 << 20)
        status, body = post(http, "/v2/models/mlp/infer", deep)
        if status != 400 or b"nested" not in body:
            fail("16 MiB of '[': %d %s" % (status, body[:300]))

        n = 4 << 20
        flat = (b'{"inputs":[{"name":"x","shape":[%d],"datatype":"FP32","data":[' % n +
                b",".join([b"0"] * n) + b"]}]}")
        status, body = post(http, "/v2/models/mlp/infer", flat)
        if status != 429 or b"parse tree" not in body:
            fail("flat array of %d zeros under a %d MiB budget: %d %s" % (n, BUDGET_MIB, status, body[:300]))

        # Parse trees that fit: built, then freed (the tensor does not fit the
        # model: 400); the memory they took must go back to the system.
        m = 1 << 20
        fits = (b'{"inputs":[{"name":"x","shape":[%d],"datatype":"FP32","data":[' % m +
                b",".join([b"0.25"] * m) + b"]}]}")
        for _ in range(4):
            status, body = post(http, "/v2/models/mlp/infer", fits)
            if status != 400:
                fail("a parse tree that fits the budget: %d %s" % (status, body[:300]))

        # Many small inputs: a tree and a protocol request of many small
        # allocations, freed when the call is refused (the model takes one).
        many = json.dumps({"inputs": [{"name": "x%d" % i, "shape": [1], "datatype": "FP32", "data": [0]}
                                      for i in range(80000)]}).encode()
        for _ in range(3):
            status, body = post(http, "/v2/models/mlp/infer", many)
            if status != 400:
                fail("80000 small inputs: %d %s" % (status, body[:300]))


        peak = rss_kib(pid, "VmHWM:")
        growth = max(0, peak - before) // 1024
        time.sleep(2.5)  # the memory returner looks once a second
        after = rss_kib(pid)
        stop.set()
        client.join()
        print("RSS before %d MiB, peak %d MiB (growth %d MiB; budget %d MiB + margin %d MiB), after %d MiB" %
              (before // 1024, peak // 1024, growth, BUDGET_MIB, MARGIN_MIB, after // 1024))
        if errors or slow:
            fail("the well-behaved client: errors %s, answers over %.1f s: %s" % (errors[:5], bound_s, slow[:5]))
        if memory_bounds_apply(pid):
            if growth > BUDGET_MIB + MARGIN_MIB:
                fail("peak RSS grew %d MiB, beyond the budget plus margin" % growth)
            if after > before + 64 * 1024:
                fail("RSS did not come back down: %d MiB before, %d MiB after" % (before // 1024, after // 1024))

        # The string bombs, measured on their own (spikes close together add
        # up until the memory returner's next look).
        bomb_before = rss_kib(pid)
        reset_peak(pid)
        # A million one-byte strings, four requests at once, JSON and binary.
        strings = 1000000
        bomb_json = (b'{"inputs":[{"name":"INPUT0","shape":[%d],"datatype":"BYTES","data":[' % strings +
                     b",".join([b'"a"'] * strings) + b"]}]}")
        header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [strings], "datatype": "BYTES",
                                         "parameters": {"binary_data_size": 5 * strings}}]}).encode()
        bomb_binary = header + b"\x01\x00\x00\x00a" * strings
        bomb_results = []

        def bomb(body, binary):
            headers = {"Content-Type": "application/octet-stream" if binary else "application/json"}
            if binary:
                headers["Inference-Header-Content-Length"] = str(len(header))
            req = urllib.request.Request("http://%s/v2/models/count_strings/infer" % http, data=body,
                                         headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    r.read()
                    bomb_results.append(r.status)
            except urllib.error.HTTPError as e:
                bomb_results.append((e.code, e.read()[:200]))
            except Exception as e:  # noqa: BLE001
                bomb_results.append(repr(e))

        for body, binary in ((bomb_json, False), (bomb_binary, True)):
            bombs = [threading.Thread(target=bomb, args=(body, binary)) for _ in range(3)]
            for t in bombs:
                t.start()
            for t in bombs:
                t.join()
        refused = [r for r in bomb_results if isinstance(r, tuple)]
        if len(bomb_results) != 6 or any(r != 200 and not (isinstance(r, tuple) and r[0] == 429) for r in bomb_results):
            fail("string bombs: each answered 200 or refused 429, got %s" % bomb_results)
        if refused and not all(b"budget" in r[1] or b"in flight" in r[1] for r in refused):
            fail("string bombs refused without naming the budget: %s" % refused)
        print("string bombs: %d of 6 served, %d refused (429)" % (6 - len(refused), len(refused)))
        bomb_growth = max(0, rss_kib(pid, "VmHWM:") - bomb_before) // 1024
        print("string bombs: RSS before %d MiB, growth %d MiB (budget %d MiB + margin %d MiB)" %
              (bomb_before // 1024, bomb_growth, BUDGET_MIB, MARGIN_MIB))
        if memory_bounds_apply(pid) and bomb_growth > BUDGET_MIB + MARGIN_MIB:
            fail("the string bombs grew RSS %d MiB, beyond the budget plus margin" % bomb_growth)
        # (After the memory bound.) Three at once may go either way; alone,
        # the budget bites exactly: half a million one-character strings
        # (128 bytes and the character each: about 62 MiB charged, with the
        # 2.4 MiB body) fit the 128 MiB budget and are served; a million of
        # 16 characters (about 137 MiB, with the 19 MiB body) cannot and are
        # refused naming it (the count stays under --max-string-elements).
        def binary_bomb(count, chars):
            item = struct.pack("<I", chars) + b"a" * chars
            head = json.dumps({"inputs": [{"name": "INPUT0", "shape": [count], "datatype": "BYTES",
                                           "parameters": {"binary_data_size": len(item) * count}}]}).encode()
            return post(http, "/v2/models/count_strings/infer", head + item * count,
                        headers={"Content-Type": "application/octet-stream",
                                 "Inference-Header-Content-Length": str(len(head))})

        # Alone: the bombs above have answered, but their shares go back
        # only once their answers are written; the client may read an
        # answer first (seen under ASan on a loaded machine: 134 MB still
        # held when the next request came).
        expect_budget_back(server, "the string bombs")
        alone_fits = binary_bomb(strings // 2, 1)
        if alone_fits[0] != 200:
            fail("half a million one-character strings alone, within the budget: %d %s" % alone_fits)
        alone_over = binary_bomb(strings, 16)
        if alone_over[0] != 429 or not (b"budget" in alone_over[1] or b"in flight" in alone_over[1]):
            fail("a million 16-character strings alone, over the budget: expected 429 naming it, got %d %s" %
                 alone_over)
        print("string bombs alone: half a million of one character served, a million of 16 refused (429)")
        expect_budget_back(server, "the REST abuse cases")
        if server.stop() != 0:
            fail("server did not exit 0 on SIGTERM")

        # Tokens are checked on the head, before the body is read.
        tokens = os.path.join(work, "tokens")
        with open(tokens, "w") as f:
            f.write("abuse-test-token-0123456789\n")
        server = Server(args.server, ["--model-repository=" + models, "--auth-token-file=" + tokens,
                                      "--repository-poll-interval=0"], os.path.join(work, "server-tokens.log"))
        http = server.http_address
        host, port = http.rsplit(":", 1)

        def head_only(authorization):
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n%s\r\n" % (http.encode(), 50 << 20, authorization))
            s.settimeout(3)
            try:
                return s.recv(4096)
            except socket.timeout:
                return b""
            finally:
                s.close()

        answer = head_only(b"")
        if not answer.startswith(b"HTTP/1.1 401"):
            fail("a head without a token (body never sent) was not refused at once: %r" % answer[:200])
        answer = head_only(b"Authorization: Bearer abuse-test-token-0123456789\r\n")
        if answer:
            fail("a head with a good token was answered before its body came: %r" % answer[:200])
        if server.stop() != 0:
            fail("server with tokens did not exit 0 on SIGTERM")
        print("REST abuse: all checks passed")
    finally:
        stop.set()
        if server and server.proc.poll() is None:
            server.proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
