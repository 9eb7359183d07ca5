#!/usr/bin/env python3
"""ModelMesh's model-runtime SPI (mmesh.ModelRuntime), with this test playing
ModelMesh's part against the real server on loopback:

  - runtimeStatus: READY with the device budgets' sum as capacity, the flags'
    timeout and default size, and the inference methods with where the model
    id goes;
  - predictModelSize before a load (the file-size estimate) and after one
    (the learned footprint, equal to what the load reported);
  - loadModel of a model folder whose config names another model, and of a
    Triton-style repository holding one model; sizes equal the cache's own
    accounting (ListDevices' resident bytes); a second load answers the same;
  - inference forwarded as ModelMesh does, with the mm-model-id header and
    the body naming the InferenceService: the answers equal the same model's
    in the repository, over the Open Inference Protocol and infergate.v1;
  - the repository's poll leaves placed models alone;
  - refusals naming their field: relative, missing and outside-the-root
    paths, a folder without a model, another model type, a bad id, an id the
    repository serves; a model file that does not load leaves nothing;
  - a load cancelled by ModelMesh, followed at once by unloadModel, and a
    cancelled load alone: nothing stays resident;
  - unloadModel (also of an unknown id), and runtimeStatus unloading what
    ModelMesh placed before;
  - bytes that are not a request, on each method: INVALID_ARGUMENT naming
    the message they should have been.

Uses Debian's python3-grpcio and python3-protobuf; the SPI's client comes
from the project's proto/mmesh/model_runtime.proto.
"""
import os
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, check, checks_made, expect_error, fail, free_port, open_inference_setup  # noqa: E402

def mesh_stubs(proto_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(["protoc", "-I", proto_dir, "--python_out", out_dir, "--grpc_python_out", out_dir,
                    "--plugin=protoc-gen-grpc_python=" + shutil.which("grpc_python_plugin"),
                    "mmesh/model_runtime.proto"], check=True)
    open(os.path.join(out_dir, "mmesh", "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)


def copy_model(models, source, dest, config=None):
    """A model folder at `dest` with `source`'s model.pt, and its config (or `config`)."""
    os.makedirs(os.path.join(dest, "1"))
    shutil.copy(os.path.join(models, source, "1", "model.pt"), os.path.join(dest, "1", "model.pt"))
    text = config if config is not None else open(os.path.join(models, source, "config.pbtxt")).read()
    open(os.path.join(dest, "config.pbtxt"), "w").write(text)


def main():
    args, work, models = open_inference_setup("ig_modelmesh_")
    mesh_stubs(args.proto_dir, os.path.join(work, "mesh_stubs"))
    server = None
    try:
        import grpc
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc
        from mmesh import model_runtime_pb2 as mm
        from mmesh import model_runtime_pb2_grpc as mm_grpc

        # The repository serves `mlp`, the twin the placed models are compared
        # with; ModelMesh's folders lie under mesh/.
        repo = os.path.join(work, "repo")
        copy_model(models, "mlp", os.path.join(repo, "mlp"))
        mesh = os.path.join(work, "mesh")
        # A model folder whose config names the model it was saved as.
        copy_model(models, "mlp", os.path.join(mesh, "mlp-pulled"),
                   'name: "mlp"\n' + open(os.path.join(models, "mlp", "config.pbtxt")).read())
        # A Triton-style repository of one model, as ModelMesh's storage helper may leave it.
        copy_model(models, "mlp", os.path.join(mesh, "triton-repo", "classifier"), """
name: "classifier"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU } ]
""")
        # About a second of work at warm-up, so its load can be cancelled midway.
        copy_model(models, "slow", os.path.join(mesh, "slow-warm"),
                   open(os.path.join(models, "slow", "config.pbtxt")).read() + "warmup: true\n")
        os.makedirs(os.path.join(mesh, "corrupt", "1"))
        open(os.path.join(mesh, "corrupt", "1", "model.pt"), "w").write("not a TorchScript archive")
        os.makedirs(os.path.join(mesh, "empty"))
        outside = os.path.join(work, "outside")
        copy_model(models, "mlp", outside)
        os.symlink(outside, os.path.join(mesh, "link-out"))
        # A model folder under the root whose version folder, or whose model
        # file, is a link that leads out of it.
        os.makedirs(os.path.join(mesh, "version-link"))
        shutil.copy(os.path.join(outside, "config.pbtxt"), os.path.join(mesh, "version-link", "config.pbtxt"))
        os.symlink(os.path.join(outside, "1"), os.path.join(mesh, "version-link", "1"))
        os.makedirs(os.path.join(mesh, "file-link", "1"))
        shutil.copy(os.path.join(outside, "config.pbtxt"), os.path.join(mesh, "file-link", "config.pbtxt"))
        os.symlink(os.path.join(outside, "1", "model.pt"), os.path.join(mesh, "file-link", "1", "model.pt"))

        mesh_port = free_port()
        server = Server(args.server, ["--model-repository=" + repo, "--repository-poll-interval=200ms",
                                      "--modelmesh-address=127.0.0.1:%d" % mesh_port,
                                      "--modelmesh-model-root=" + mesh, "--modelmesh-load-timeout=90s",
                                      "--modelmesh-default-model-size=64MiB"],
                        os.path.join(work, "server.log"))
        server.wait_serving()
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        v1stub = v1_grpc.InferenceServiceStub(channel)
        spi = mm_grpc.ModelRuntimeStub(grpc.insecure_channel("127.0.0.1:%d" % mesh_port))

        def resident():
            devices = v1stub.ListDevices(v1.ListDevicesRequest(), timeout=30).devices
            return sum(d.cache_resident_bytes for d in devices), devices

        def indexed():
            return {m.name: m.state for m in stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=30).models}

        def infer(model_id, x, body_name="the-inferenceservice"):
            req = pb.ModelInferRequest(model_name=body_name)
            req.inputs.add(name="x", datatype="FP32", shape=[2, 256])
            req.raw_input_contents.append(x)
            r = stub.ModelInfer(req, metadata=[("mm-model-id", model_id)], timeout=60)
            return r.raw_output_contents[0]

        # --- bytes that are not the method's request: INVALID_ARGUMENT naming
        # the message they should have been (not INTERNAL with no message)
        spi_channel = grpc.insecure_channel("127.0.0.1:%d" % mesh_port)
        for method, message in [("loadModel", "LoadModelRequest"), ("unloadModel", "UnloadModelRequest"),
                                ("predictModelSize", "PredictModelSizeRequest"), ("modelSize", "ModelSizeRequest"),
                                ("runtimeStatus", "RuntimeStatusRequest")]:
            raw = spi_channel.unary_unary("/mmesh.ModelRuntime/" + method)
            try:
                raw(b"\xff\xff\xff\xff not a request", timeout=30)
                fail("%s answered OK to bytes that are not a request" % method)
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and
                      e.details() == "request: not a valid mmesh.%s message (it does not parse)" % message,
                      "%s on garbage: %s %r" % (method, e.code(), e.details()))
        spi_channel.close()

        # --- runtimeStatus
        status = spi.runtimeStatus(mm.RuntimeStatusRequest(), timeout=30)
        _, devices = resident()
        check(status.status == mm.RuntimeStatusResponse.READY, "runtimeStatus: %s" % status)
        budget = sum(d.cache_budget_bytes for d in devices if d.available)
        check(budget > 0 and status.capacityInBytes == budget,
              "capacity %d is not the device budgets' sum %d" % (status.capacityInBytes, budget))
        check(status.maxLoadingConcurrency == 1 and status.modelLoadingTimeoutMs == 90000 and
              status.defaultModelSizeInBytes == 64 << 20 and status.runtimeVersion, "runtimeStatus: %s" % status)
        for method in ["inference.GRPCInferenceService/ModelInfer", "inference.GRPCInferenceService/ModelMetadata",
                       "inference.GRPCInferenceService/ModelReady", "infergate.v1.InferenceService/Infer"]:
            check(list(status.methodInfos[method].idInjectionPath) == [1], "methodInfos[%s]: %s" % (method, status))
        check(not status.allowAnyMethod and not status.limitModelConcurrency, "runtimeStatus: %s" % status)

        # --- predictModelSize before any load: the estimate from the file
        folder = os.path.join(mesh, "mlp-pulled")
        model_file = os.path.getsize(os.path.join(folder, "1", "model.pt"))
        predicted = spi.predictModelSize(mm.PredictModelSizeRequest(modelId="mlp__isvc-1", modelType="pytorch",
                                                                    modelPath=folder), timeout=30).sizeInBytes
        # Nothing learned yet: the estimate is the file's size scaled to the
        # dtype a cold start picks (FLOAT32 on the CPU: the size itself).
        check(predicted == model_file, "predicted %d for a %d-byte model file" % (predicted, model_file))
        # What the repository holds resident (its mlp, warmed up): every figure
        # below is the cache's total less this.
        base = resident()[0]
        check(base > 0, "the repository's mlp is not resident after its warm-up")

        # --- loadModel: answers once it serves, with the cache's own figure
        loaded = spi.loadModel(mm.LoadModelRequest(modelId="mlp__isvc-1", modelType="pytorch", modelPath=folder,
                                                   modelKey='{"storage_key": "default"}'), timeout=90)
        held = resident()[0] - base
        check(loaded.sizeInBytes > 0 and loaded.sizeInBytes == held,
              "load reported %d bytes; the cache holds %d more" % (loaded.sizeInBytes, held))
        check(spi.modelSize(mm.ModelSizeRequest(modelId="mlp__isvc-1"), timeout=30).sizeInBytes == held,
              "modelSize differs from the cache")
        check(spi.loadModel(mm.LoadModelRequest(modelId="mlp__isvc-1", modelPath=folder),
                            timeout=90).sizeInBytes == held, "a second load answered differently")
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp__isvc-1"), timeout=30).ready, "placed model not ready")

        # --- forwarded inference reaches it, and answers as the repository's twin
        x = struct.pack("<512f", *[((i * 7) % 13) / 6.0 - 1.0 for i in range(512)])
        req = pb.ModelInferRequest(model_name="mlp")
        req.inputs.add(name="x", datatype="FP32", shape=[2, 256])
        req.raw_input_contents.append(x)
        twin = stub.ModelInfer(req, timeout=60).raw_output_contents[0]
        check(infer("mlp__isvc-1", x) == twin, "the placed model answers differently from its twin")
        check(infer("mlp__isvc-1", x, body_name="mlp__isvc-1") == twin, "id in the body (ModelMesh's injection)")
        v1req = v1.InferRequest(model="the-inferenceservice")
        v1req.inputs.add(name="x", dtype=1, shape=[2, 256], data=x)
        check(v1stub.Infer(v1req, metadata=[("mm-model-id", "mlp__isvc-1")], timeout=60).outputs[0].data == twin,
              "infergate.v1 with mm-model-id")
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="isvc"), metadata=[("mm-model-id", "mlp__isvc-1")])
        check([t.name for t in meta.inputs] == ["x"], "ModelMetadata with mm-model-id: %s" % meta)
        # The learned footprint now predicts the same size.
        again = spi.predictModelSize(mm.PredictModelSizeRequest(modelId="mlp__isvc-1", modelPath=folder),
                                     timeout=30).sizeInBytes
        check(again == loaded.sizeInBytes, "predicted %d after the load measured %d" % (again, loaded.sizeInBytes))

        # --- a Triton repository of one model
        triton = spi.loadModel(mm.LoadModelRequest(modelId="classifier__isvc-2", modelType="pytorch",
                                                   modelPath=os.path.join(mesh, "triton-repo")), timeout=90)
        check(triton.sizeInBytes > 0, "Triton folder size %s" % triton)
        req = pb.ModelInferRequest(model_name="classifier")
        req.inputs.add(name="INPUT__0", datatype="FP32", shape=[2, 256])
        req.raw_input_contents.append(x)
        r = stub.ModelInfer(req, metadata=[("mm-model-id", "classifier__isvc-2")], timeout=60)
        check(r.outputs[0].name == "OUTPUT__0" and r.raw_output_contents[0] == twin, "Triton-style model answer")
        check(resident()[0] - base == loaded.sizeInBytes + triton.sizeInBytes,
              "two models: the cache holds another sum")

        # --- the repository's poll leaves them alone
        time.sleep(1.0)
        index = indexed()
        check(index.get("mlp__isvc-1") == "READY" and index.get("classifier__isvc-2") == "READY",
              "after polls: %s" % index)

        # --- refusals, each naming its field; nothing is left of them
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        load = lambda **kw: spi.loadModel(mm.LoadModelRequest(**kw), timeout=60)  # noqa: E731
        expect_error(lambda: load(modelId="a", modelPath="mesh/mlp-pulled"), invalid, "modelPath", "absolute")
        expect_error(lambda: load(modelId="a", modelPath=os.path.join(mesh, "missing")), invalid, "modelPath")
        expect_error(lambda: load(modelId="a", modelPath=outside), invalid, "modelPath", "model root")
        expect_error(lambda: load(modelId="a", modelPath=os.path.join(mesh, "link-out")), invalid, "model root")
        expect_error(lambda: load(modelId="a", modelPath=os.path.join(mesh, "version-link")), invalid,
                     "1 is a symbolic link that leads outside the model root")
        expect_error(lambda: load(modelId="a", modelPath=os.path.join(mesh, "file-link")), invalid,
                     "1/model.pt is a symbolic link that leads outside the model root")
        expect_error(lambda: load(modelId="a", modelPath=os.path.join(mesh, "empty")), invalid, "holds no model")
        expect_error(lambda: load(modelId="a", modelType="onnx", modelPath=folder), invalid, "modelType", "onnx")
        expect_error(lambda: load(modelId="a/b", modelPath=folder), invalid, "modelId")
        expect_error(lambda: load(modelId="", modelPath=folder), invalid, "modelId")
        expect_error(lambda: load(modelId="mlp", modelPath=folder), grpc.StatusCode.FAILED_PRECONDITION, "mlp")
        e = expect_error(lambda: load(modelId="broken__isvc-3", modelPath=os.path.join(mesh, "corrupt")),
                         grpc.StatusCode.FAILED_PRECONDITION)
        check("broken__isvc-3" not in indexed(), "a failed load left an entry: %s" % indexed())
        expect_error(lambda: spi.modelSize(mm.ModelSizeRequest(modelId="broken__isvc-3"), timeout=30),
                     grpc.StatusCode.NOT_FOUND, "broken__isvc-3")
        expect_error(lambda: spi.predictModelSize(mm.PredictModelSizeRequest(modelId="a", modelPath=outside),
                                                  timeout=30), invalid, "modelPath")
        check(resident()[0] - base == loaded.sizeInBytes + triton.sizeInBytes, "refused loads changed the cache")
        check(indexed().get("mlp") is not None, "the repository's own model is gone")

        # --- unloadModel: gone at once, and OK for an unknown id
        spi.unloadModel(mm.UnloadModelRequest(modelId="classifier__isvc-2"), timeout=60)
        check(resident()[0] - base == loaded.sizeInBytes, "unload left bytes resident")
        check("classifier__isvc-2" not in indexed(), "unloaded model still indexed")
        expect_error(lambda: infer("classifier__isvc-2", x), grpc.StatusCode.NOT_FOUND, "classifier__isvc-2")
        expect_error(lambda: spi.modelSize(mm.ModelSizeRequest(modelId="classifier__isvc-2"), timeout=30),
                     grpc.StatusCode.NOT_FOUND)
        spi.unloadModel(mm.UnloadModelRequest(modelId="never-loaded"), timeout=30)
        spi.unloadModel(mm.UnloadModelRequest(modelId="mlp"), timeout=30)  # the repository's: not ModelMesh's
        check(indexed().get("mlp") == "READY", "unloadModel touched a repository model")

        # --- a cancelled load, then unloadModel at once (ModelMesh's sequence)
        slow = os.path.join(mesh, "slow-warm")
        before = resident()[0]
        def log_has(text, timeout=60):
            deadline = time.time() + timeout
            while time.time() < deadline:
                if text in open(server.log_path).read():
                    return True
                time.sleep(0.02)
            return False

        # Cancelled once the server has begun the load (its log says so), so
        # the cancellation is the server's to handle, not gRPC's.
        call = spi.loadModel.future(mm.LoadModelRequest(modelId="slow__isvc-4", modelPath=slow), timeout=90)
        check(log_has("loading 'slow__isvc-4'"), "the load of slow__isvc-4 never began")
        call.cancel()
        spi.unloadModel(mm.UnloadModelRequest(modelId="slow__isvc-4"), timeout=90)
        check(resident()[0] == before, "a cancelled load left bytes resident")
        check("slow__isvc-4" not in indexed(), "a cancelled load left an entry: %s" % indexed())
        expect_error(lambda: spi.modelSize(mm.ModelSizeRequest(modelId="slow__isvc-4"), timeout=30),
                     grpc.StatusCode.NOT_FOUND)
        # A cancelled load without the unload undoes itself once it finishes.
        call = spi.loadModel.future(mm.LoadModelRequest(modelId="slow__isvc-5", modelPath=slow), timeout=90)
        check(log_has("loading 'slow__isvc-5'"), "the load of slow__isvc-5 never began")
        call.cancel()
        # The undo happens once the load finishes: wait for it, then look.
        check(log_has("'slow__isvc-5': load cancelled; unloaded again", timeout=90),
              "slow__isvc-5: no sign of the undo in the log")
        deadline = time.time() + 90
        while time.time() < deadline and ("slow__isvc-5" in indexed() or resident()[0] != before):
            time.sleep(0.1)
        check("slow__isvc-5" not in indexed() and resident()[0] == before,
              "a cancelled load stayed: %s, %d bytes" % (indexed(), resident()[0]))
        # Each cancelled load was undone by the rule for it.
        for model_id in ["slow__isvc-4", "slow__isvc-5"]:
            check(log_has("'%s': load cancelled; unloaded again" % model_id),
                  "%s: no sign of the undo in the log" % model_id)
        # The same id loads afterwards.
        check(spi.loadModel(mm.LoadModelRequest(modelId="slow__isvc-5", modelPath=slow),
                            timeout=90).sizeInBytes > 0, "load after a cancelled one")

        # --- runtimeStatus at ModelMesh's restart unloads what it placed
        check(spi.runtimeStatus(mm.RuntimeStatusRequest(), timeout=90).status == mm.RuntimeStatusResponse.READY,
              "runtimeStatus")
        check(resident()[0] == base, "runtimeStatus left placed models resident")
        index = indexed()
        check("mlp__isvc-1" not in index and "slow__isvc-5" not in index and index.get("mlp") == "READY",
              "after runtimeStatus: %s" % index)
        check(server.stop() == 0, "server did not exit cleanly")
        server = None

        # --- on a unix: socket (no model root needed: the file's permissions
        # guard it): ModelMesh reaches the SPI through the socket's path.
        socket_path = os.path.join(work, "mesh.sock")
        server = Server(args.server, ["--model-repository=" + repo, "--modelmesh-address=unix:" + socket_path],
                        os.path.join(work, "server-unix.log"))
        server.wait_serving()
        spi = mm_grpc.ModelRuntimeStub(grpc.insecure_channel("unix:" + socket_path))
        check(spi.runtimeStatus(mm.RuntimeStatusRequest(), timeout=90).status == mm.RuntimeStatusResponse.READY,
              "runtimeStatus over unix:%s" % socket_path)
        loaded = spi.loadModel(mm.LoadModelRequest(modelId="mlp__isvc-9", modelPath=os.path.join(mesh, "mlp-pulled")),
                               timeout=90)
        check(loaded.sizeInBytes > 0, "a load over the unix socket: %s" % loaded)
        check(server.stop() == 0, "server did not exit cleanly")
        server = None

        # --- runtimeStatus is STARTING until the repository serves: a
        # repository of three models warmed up on a simulated cuda:0 whose
        # every load waits 1.5 s for its transfer, so warm-up takes seconds
        # however fast the machine computes (a fast machine once warmed the
        # three up before the first poll). The SPI answers from the first
        # moment (its port is printed before warm-up), STARTING, then READY
        # once the server is ready.
        starting = os.path.join(work, "starting-repo")
        for name in ("warm_a", "warm_b", "warm_c"):
            copy_model(models, "mlp", os.path.join(starting, name))  # its config asks for warm-up
        socket_path = os.path.join(work, "mesh-starting.sock")
        server = Server(args.server, ["--model-repository=" + starting, "--modelmesh-address=unix:" + socket_path,
                                      "--simulate-devices=cuda:0,transfer_latency=1500ms"],
                        os.path.join(work, "server-starting.log"))
        spi = mm_grpc.ModelRuntimeStub(grpc.insecure_channel("unix:" + socket_path))
        seen = []
        deadline = time.time() + 120
        while time.time() < deadline and (not seen or seen[-1] != mm.RuntimeStatusResponse.READY):
            try:
                status = spi.runtimeStatus(mm.RuntimeStatusRequest(), timeout=10).status
            except grpc.RpcError as e:
                seen.append("error " + e.code().name)
                break
            if not seen or seen[-1] != status:
                seen.append(status)
            time.sleep(0.02)
        check(seen == [mm.RuntimeStatusResponse.STARTING, mm.RuntimeStatusResponse.READY],
              "runtimeStatus while the repository warmed up, then after: %s" %
              [mm.RuntimeStatusResponse.Status.Name(s) if isinstance(s, int) else s for s in seen])
        warmed = open(os.path.join(work, "server-starting.log")).read()
        check(all("warm-up of model '%s'" % name in warmed for name in ("warm_a", "warm_b", "warm_c")),
              "the three models were warmed up before READY:\n" + warmed)
        server.wait_serving(timeout=10)
        check(server.stop() == 0, "server did not exit cleanly")
        server = None
        print("model_mesh_test: %d checks passed" % checks_made())
    finally:
        if server:
            server.stop()
            print(open(os.path.join(work, "server.log")).read()[-4000:])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
