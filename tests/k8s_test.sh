#!/usr/bin/env bash
# Renders every kustomize overlay, lints the output with yamllint and
# validates every object offline against the Kubernetes and Prometheus
# Operator schemas; a deliberately broken manifest must fail the same check.
set -uo pipefail
src="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src/deploy/k8s"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
# A broken manifest must fail the check, and for the reason it was broken for.
expect_invalid() {  # what, expected message, files...
  local what="$1" why="$2" out
  shift 2
  if out=$(node validate/validate.js "$@" 2>&1); then
    bad "$what passed"
  elif grep -qF -- "$why" <<<"$out"; then
    ok "$what fails the check for its reason"
  else
    bad "$what failed for another reason: $out"
  fi
}

(cd validate && npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1) || { cat "$work/npm.log"; bad "npm ci"; }

if yamllint -c .yamllint base overlays monitoring >"$work/lint-src.log" 2>&1; then ok "yamllint sources"; else cat "$work/lint-src.log"; bad "yamllint sources"; fi

rendered=()
for dir in overlays/cpu overlays/gpu overlays/tls overlays/model-sync overlays/tracing monitoring; do
  out="$work/$(echo "$dir" | tr / -).yaml"
  if kubectl kustomize "$dir" >"$out" 2>"$work/kustomize.err"; then
    ok "kubectl kustomize $dir"
    rendered+=("$out")
  else
    cat "$work/kustomize.err"
    bad "kubectl kustomize $dir"
    continue
  fi
  if yamllint -c .yamllint "$out" >"$work/lint.log" 2>&1; then ok "yamllint rendered $dir"; else cat "$work/lint.log"; bad "yamllint rendered $dir"; fi
  if node validate/validate.js --rules "$src/deploy/monitoring/rules/infergate.rules.yml" "$out"; then
    ok "schemas $dir"
  else
    bad "schemas $dir"
  fi
done

# What the overlays must contain.
cpu="$work/overlays-cpu.yaml"
gpu="$work/overlays-gpu.yaml"
for want in "kind: Deployment" "kind: PodDisruptionBudget" "kind: HorizontalPodAutoscaler" "clusterIP: None" \
            "service: liveness" "readOnlyRootFilesystem: true" "INFERGATE_DEVICES: cpu" \
            "kind: NetworkPolicy" "INFERGATE_DISABLE_ADMIN: \"true\"" "secretName: infergate-tokens" \
            "INFERGATE_AUTH_TOKEN_FILE: /etc/infergate/tokens/inference"; do
  if grep -q "$want" "$cpu"; then ok "cpu overlay has '$want'"; else bad "cpu overlay lacks '$want'"; fi
done
# Models updated in place: the server polls a volume a sidecar keeps in step.
sync="$work/overlays-model-sync.yaml"
for want in "INFERGATE_REPOSITORY_POLL_INTERVAL: 5s" "name: model-sync$" "name: model-sync-initial" "mountPath: /models"; do
  if grep -q -- "$want" "$sync"; then ok "model-sync overlay has '$want'"; else bad "model-sync overlay lacks '$want'"; fi
done
if grep -q "kind: PersistentVolumeClaim" "$sync"; then bad "model-sync overlay still claims a shared volume"; else ok "model-sync overlay has no shared claim"; fi
# TLS: exec probes that speak TLS replace the kubelet's plaintext gRPC probes.
tls="$work/overlays-tls.yaml"
for want in "INFERGATE_TLS_CERT: /etc/infergate/tls/tls.crt" "secretName: infergate-tls" "--tls-ca=/etc/infergate/tls/ca.crt" \
            "--service=liveness" "kind: NetworkPolicy"; do
  if grep -q -- "$want" "$tls"; then ok "tls overlay has '$want'"; else bad "tls overlay lacks '$want'"; fi
done
if grep -q "^ *grpc:$" "$tls"; then bad "tls overlay still has a plaintext gRPC probe"; else ok "tls overlay has no plaintext gRPC probe"; fi
for want in "nvidia.com/gpu: \"1\"" "runtimeClassName: nvidia" "image: infergate:0.1.0-cuda"; do
  if grep -q "$want" "$gpu"; then ok "gpu overlay has '$want'"; else bad "gpu overlay lacks '$want'"; fi
done

# Tracing: the servers export to the collector the overlay runs, and the
# pod's identity goes into the spans' resource.
tracing="$work/overlays-tracing.yaml"
for want in "OTEL_EXPORTER_OTLP_ENDPOINT: http://otel-collector:4317" "OTEL_TRACES_SAMPLER: parentbased_traceidratio" \
            "OTEL_TRACES_SAMPLER_ARG: \"0.01\"" "name: otel-collector-config" "fieldPath: metadata.name" \
            "value: k8s.pod.name=\$(K8S_POD_NAME)"; do
  if grep -q -- "$want" "$tracing"; then ok "tracing overlay has '$want'"; else bad "tracing overlay lacks '$want'"; fi
done
sed 's/exporters: \[debug, otlp\/backend\]/exporters: [debug, otlp\/nowhere]/' "$tracing" >"$work/broken-tracing.yaml"
expect_invalid "a collector pipeline naming an undefined exporter" "names exporter otlp/nowhere, which is not defined" \
  "$work/broken-tracing.yaml"
sed 's|OTEL_EXPORTER_OTLP_ENDPOINT: http://otel-collector:4317|OTEL_EXPORTER_OTLP_ENDPOINT: http://otel-collector:4999|' \
  "$tracing" >"$work/broken-endpoint.yaml"
expect_invalid "an OTLP endpoint on a port the collector Service lacks" "Service otel-collector has no port 4999" \
  "$work/broken-endpoint.yaml"

# KServe: the ServingRuntime and the example InferenceService.
if yamllint -c .yamllint ../kserve >"$work/lint-kserve.log" 2>&1; then ok "yamllint kserve"; else cat "$work/lint-kserve.log"; bad "yamllint kserve"; fi
if node validate/validate.js ../kserve/servingruntime.yaml ../kserve/inferenceservice.yaml \
     ../kserve/inferenceservice-rest.yaml; then
  ok "kserve runtime and inference services (grpc-v2 and v2)"
else
  bad "kserve runtime and inference services"
fi
if node validate/validate.js ../kserve/clusterservingruntime-pytorch.yaml ../kserve/inferenceservice-torchserve.yaml; then
  ok "kserve pytorch cluster runtime and a TorchServe InferenceService (v1, auto-selected)"
else
  bad "kserve pytorch cluster runtime and a TorchServe InferenceService"
fi
expect_invalid "an auto-selected pytorch runtime without v1" "must include v1 in spec.protocolVersions" \
  "$src/tests/k8s/broken-clusterservingruntime-pytorch.yaml"
expect_invalid "a V1 InferenceService with no runtime that speaks V1" "no runtime among the files checked auto-selects pytorch over v1" \
  ../kserve/servingruntime.yaml ../kserve/inferenceservice-torchserve.yaml
expect_invalid "a ServingRuntime without an http1 port" "has no port named http1" \
  "$src/tests/k8s/broken-servingruntime.yaml"
expect_invalid "a grpc-v2 InferenceService on the wrong h2c port" "is not runtime infergate's gRPC port 9000" \
  ../kserve/servingruntime.yaml "$src/tests/k8s/broken-inferenceservice.yaml"

# ModelMesh: the multi-model runtime and a model placed on it.
if node validate/validate.js ../kserve/servingruntime-modelmesh.yaml ../kserve/inferenceservice-modelmesh.yaml; then
  ok "kserve ModelMesh runtime and InferenceService"
else
  bad "kserve ModelMesh runtime and InferenceService"
fi
for want in "multiModel: true" "grpcEndpoint: \"port:8085\"" "grpcDataEndpoint: \"port:8001\"" "--modelmesh-model-root=/models"; do
  if grep -q -- "$want" ../kserve/servingruntime-modelmesh.yaml; then ok "ModelMesh runtime has '$want'"; else bad "ModelMesh runtime lacks '$want'"; fi
done
expect_invalid "a ModelMesh runtime whose SPI port is not its grpcEndpoint" \
  "--modelmesh-address 127.0.0.1:8086 is not spec.grpcEndpoint's port 8085" \
  "$src/tests/k8s/broken-servingruntime-modelmesh.yaml"
expect_invalid "a ModelMesh runtime serving /models as its repository" \
  "--model-repository must be a folder of its own" "$src/tests/k8s/broken-servingruntime-modelmesh-repository.yaml"
expect_invalid "a ModelMesh InferenceService on the single-model runtime" \
  "deploymentMode ModelMesh needs a multiModel runtime" \
  ../kserve/servingruntime.yaml "$src/tests/k8s/broken-inferenceservice-modelmesh.yaml"

# The check itself must catch a broken manifest.
if out=$(node validate/validate.js "$src/tests/k8s/broken-deployment.yaml" 2>&1); then
  bad "a broken manifest passed the schema check"
elif grep -q "spec/replicas must be integer" <<<"$out" && grep -q "containerPort must be integer" <<<"$out"; then
  ok "a broken manifest fails the schema check, naming both faults"
else
  bad "the broken Deployment failed for another reason: $out"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
