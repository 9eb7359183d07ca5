#!/usr/bin/env python3
"""Triton's model control modes, against the real server on loopback.

- explicit with --load-model=mlp: mlp is served from the start, cnn is
  not (not ready, its requests refused, UNAVAILABLE in the repository
  index) until a RepositoryModelLoad; an unload takes it out again; over
  gRPC and REST.
- poll and none: RepositoryModelLoad and -Unload (gRPC and REST) are
  refused with Triton's words, UNAVAILABLE / 503, and every model serves.
- explicit with a --load-model the repository lacks: the server does not
  start, and says why.

Uses Debian's python3-grpcio and python3-protobuf.
"""
import http.client
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, check, checks_made, open_inference_setup  # noqa: E402

REFUSAL = "explicit model load / unload is not allowed if polling is enabled"


def main():
    args, work, models = open_inference_setup("ig_modelcontrol_")
    import grpc
    import grpc_service_pb2 as pb
    import grpc_service_pb2_grpc as pb_grpc

    def connect(server):
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address))
        host, port = server.http_address.rsplit(":", 1)

        def rest(method, path, body=None):
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            conn.request(method, path, body=body, headers={"Host": "localhost"})
            r = conn.getresponse()
            data = r.read()
            conn.close()
            return r.status, data
        return stub, rest

    def mlp_request():
        req = pb.ModelInferRequest(model_name="mlp")
        req.inputs.add(name="x", datatype="FP32", shape=[1, 256])
        req.raw_input_contents.append(b"\0" * 1024)
        return req

    def cnn_request():
        req = pb.ModelInferRequest(model_name="cnn")
        req.inputs.add(name="image", datatype="FP32", shape=[1, 3, 64, 64])
        req.raw_input_contents.append(b"\0" * (3 * 64 * 64 * 4))
        return req

    def refused(call):
        try:
            call()
        except grpc.RpcError as e:
            return e
        return None

    server = None
    try:
        # --- explicit: only --load-model's models serve from the start
        server = Server(args.server, ["--model-repository=" + models, "--model-control-mode=explicit",
                                      "--load-model=mlp"], os.path.join(work, "explicit.log"))
        server.wait_serving()
        stub, rest = connect(server)
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "mlp, named by --load-model, is ready")
        check(not stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "cnn is ready before any load")
        check(len(stub.ModelInfer(mlp_request()).outputs) == 1, "mlp answers")
        e = refused(lambda: stub.ModelInfer(cnn_request()))
        check(e is not None, "cnn answered before it was loaded")
        index = {m.name: m for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        check(index["mlp"].state == "READY" and index["cnn"].state == "UNAVAILABLE",
              "index: mlp %s, cnn %s" % (index["mlp"].state, index["cnn"].state))
        check("unloaded" in index["cnn"].reason, "cnn's reason: %r" % index["cnn"].reason)
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="cnn"))
        check(stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "cnn ready after its load")
        check(len(stub.ModelInfer(cnn_request()).outputs) == 1, "cnn answers after its load")
        status, _ = rest("POST", "/v2/repository/models/cnn/unload")
        check(status == 200, "REST unload: %d" % status)
        check(not stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "cnn ready after its unload")
        status, _ = rest("POST", "/v2/repository/models/cnn/load")
        check(status == 200 and stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "REST load: %d" % status)
        check(server.stop() == 0, "server did not exit cleanly")
        server = None

        # --- poll and none: loads and unloads refused in Triton's words
        for mode in ("poll", "none"):
            server = Server(args.server, ["--model-repository=" + models, "--model-control-mode=" + mode],
                            os.path.join(work, mode + ".log"))
            server.wait_serving()
            stub, rest = connect(server)
            check(len(stub.ModelInfer(mlp_request()).outputs) == 1, "%s: mlp answers" % mode)
            check(len(stub.ModelInfer(cnn_request()).outputs) == 1, "%s: cnn answers" % mode)
            for call in (lambda: stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="cnn")),
                         lambda: stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="cnn"))):
                e = refused(call)
                check(e is not None and e.code() == grpc.StatusCode.UNAVAILABLE and e.details().startswith(REFUSAL),
                      "%s: gRPC load/unload: %s" % (mode, e and (e.code(), e.details())))
            for action in ("load", "unload"):
                status, body = rest("POST", "/v2/repository/models/cnn/" + action)
                check(status == 503 and json.loads(body)["error"].startswith(REFUSAL),
                      "%s: REST %s: %d %r" % (mode, action, status, body[:200]))
            check(stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "%s: cnn still ready" % mode)
            check(server.stop() == 0, "server did not exit cleanly")
            server = None

        # --- a --load-model the repository lacks stops the server
        r = subprocess.run([args.server, "--model-repository=" + models, "--address=127.0.0.1:0",
                            "--http-address=127.0.0.1:0", "--metrics-address=127.0.0.1:0",
                            "--model-control-mode=explicit", "--load-model=mlp,nosuch"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and "--load-model: failed to load 'nosuch'" in r.stderr,
              "a missing --load-model model: exit %d, %s" % (r.returncode, r.stderr[-400:]))
        print("model_control_test: %d checks passed" % checks_made())
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
