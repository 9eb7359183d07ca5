// Validates rendered Kubernetes manifests offline against the Kubernetes and
// Prometheus Operator schemas (kubernetes-models), and checks that the
// PrometheusRule carries exactly the rules of deploy/monitoring. KServe's
// ServingRuntime and InferenceService have no maintained schema package:
// their containers are checked against the Pod schema and the fields the
// runtime depends on are checked by hand (kserveChecks below).
//   node validate.js --rules RULES.yml FILE.yaml...
// Exits non-zero on the first invalid object, naming it.
"use strict";
const fs = require("fs");
const yaml = require("js-yaml");

const models = {
  "v1/ConfigMap": () => require("kubernetes-models/v1").ConfigMap,
  "v1/Service": () => require("kubernetes-models/v1").Service,
  "v1/PersistentVolumeClaim": () => require("kubernetes-models/v1").PersistentVolumeClaim,
  "apps/v1/Deployment": () => require("kubernetes-models/apps/v1").Deployment,
  "networking.k8s.io/v1/NetworkPolicy": () => require("kubernetes-models/networking.k8s.io/v1").NetworkPolicy,
  "policy/v1/PodDisruptionBudget": () => require("kubernetes-models/policy/v1").PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": () => require("kubernetes-models/autoscaling/v2").HorizontalPodAutoscaler,
  "monitoring.coreos.com/v1/ServiceMonitor": () =>
    require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1").ServiceMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": () =>
    require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1").PrometheusRule,
};

function need(cond, what) {
  if (!cond) throw new Error(what);
}

// The container's args as flag -> value ("--address=H:P" -> "H:P").
function flagValues(container) {
  const out = {};
  for (const a of container.args || []) {
    const eq = a.indexOf("=");
    if (eq > 0) out[a.slice(0, eq)] = a.slice(eq + 1);
  }
  return out;
}

// The port of "HOST:PORT"; null for anything else.
function portOf(address) {
  const m = /:(\d+)$/.exec(address || "");
  return m ? Number(m[1]) : null;
}

// A ModelMesh runtime (multiModel): ModelMesh calls the model-runtime SPI
// at grpcEndpoint and forwards inference to grpcDataEndpoint, both on the
// pod's loopback; custom runtimes speak gRPC only.
function modelMeshRuntime(doc, seen) {
  const spec = doc.spec;
  need(Array.isArray(spec.protocolVersions) && spec.protocolVersions.length === 1 &&
       spec.protocolVersions[0] === "grpc-v2",
       "a ModelMesh runtime's spec.protocolVersions must be [grpc-v2] (ModelMesh's REST proxy serves REST)");
  need(Array.isArray(spec.containers) && spec.containers.length > 0, "spec.containers is empty");
  const { Pod } = require("kubernetes-models/v1");
  new Pod({ apiVersion: "v1", kind: "Pod", metadata: { name: "check" },
            spec: { containers: spec.containers, volumes: spec.volumes } }).validate();
  const main = spec.containers.find((c) => flagValues(c)["--modelmesh-address"] !== undefined);
  need(main, "no container sets --modelmesh-address (the SPI ModelMesh places models through)");
  const flags = flagValues(main);
  const endpoint = /^port:(\d+)$/.exec(spec.grpcEndpoint || "");
  need(endpoint, "spec.grpcEndpoint must be port:N (where ModelMesh calls the model-runtime SPI)");
  need(portOf(flags["--modelmesh-address"]) === Number(endpoint[1]),
       `--modelmesh-address ${flags["--modelmesh-address"]} is not spec.grpcEndpoint's port ${endpoint[1]}`);
  const data = /^port:(\d+)$/.exec(spec.grpcDataEndpoint || "");
  need(data, "spec.grpcDataEndpoint must be port:N (where ModelMesh forwards inference)");
  need(portOf(flags["--address"]) === Number(data[1]),
       `--address ${flags["--address"]} is not spec.grpcDataEndpoint's port ${data[1]}`);
  need(flags["--modelmesh-model-root"] === "/models",
       "--modelmesh-model-root must be /models (where ModelMesh's storage helper puts models)");
  const repo = flags["--model-repository"] || "";
  need(repo && repo !== "/models" && !repo.startsWith("/models/"),
       "--model-repository must be a folder of its own, not under /models (ModelMesh's models are not the " +
       "repository's)");
  seen.runtimes[doc.metadata.name] = {
    formats: spec.supportedModelFormats.map((f) => f.name),
    grpcPort: portOf(flags["--address"]),
    httpPort: null,
    modelMesh: true,
  };
}

// The parts of KServe's objects infergate relies on.
function servingRuntime(doc, seen) {
    const spec = doc.spec || {};
    need(doc.metadata && doc.metadata.name, "metadata.name is missing");
    need(Array.isArray(spec.supportedModelFormats) && spec.supportedModelFormats.length > 0 &&
         spec.supportedModelFormats.every((f) => typeof f.name === "string" && f.name),
         "spec.supportedModelFormats needs named formats");
    if (spec.multiModel === true) return modelMeshRuntime(doc, seen);
    need(Array.isArray(spec.protocolVersions) && spec.protocolVersions.includes("v2") &&
         spec.protocolVersions.includes("grpc-v2"), "spec.protocolVersions must include v2 and grpc-v2");
    // Auto-selected for pytorch: InferenceServices written for KServe's
    // TorchServe runtime speak V1.
    const autoPytorch = spec.supportedModelFormats.some((f) => f.name === "pytorch" && f.autoSelect === true);
    need(!autoPytorch || spec.protocolVersions.includes("v1"),
         "a runtime auto-selected for pytorch must include v1 in spec.protocolVersions (KServe's TorchServe " +
         "clients speak V1)");
    need(Array.isArray(spec.containers) && spec.containers.length > 0, "spec.containers is empty");
    const { Pod } = require("kubernetes-models/v1");
    new Pod({ apiVersion: "v1", kind: "Pod", metadata: { name: "check" }, spec: { containers: spec.containers } })
      .validate();
    const main = spec.containers.find((c) => c.name === "kserve-container");
    need(main, "no container named kserve-container");
    const http1 = (main.ports || []).find((p) => p.name === "http1");
    need(http1, "kserve-container has no port named http1 (KServe sends v2 REST there)");
    const args = main.args || [];
    need(args.includes("--model-repository=/mnt/models"), "args must serve --model-repository=/mnt/models");
    const port = (flag) => {
      const arg = args.find((a) => a.startsWith(`${flag}=`));
      return arg ? Number(arg.slice(arg.lastIndexOf(":") + 1)) : null;
    };
    need(port("--http-address") === http1.containerPort,
         `--http-address must listen on the http1 port ${http1.containerPort}`);
    need(port("--address"), "args must set --address (the gRPC port an h2c port names for grpc-v2)");
    seen.runtimes[doc.metadata.name] = {
      formats: spec.supportedModelFormats.map((f) => f.name),
      autoSelect: spec.supportedModelFormats.filter((f) => f.autoSelect === true).map((f) => f.name),
      protocols: spec.protocolVersions,
      grpcPort: port("--address"),
      httpPort: http1.containerPort,
    };
}

// The parts of KServe's objects infergate relies on.
const kserveChecks = {
  "serving.kserve.io/v1alpha1/ServingRuntime": servingRuntime,
  "serving.kserve.io/v1alpha1/ClusterServingRuntime": servingRuntime,
  "serving.kserve.io/v1beta1/InferenceService": (doc, seen) => {
    const model = (((doc.spec || {}).predictor || {}).model) || {};
    need(model.modelFormat && model.modelFormat.name, "spec.predictor.model.modelFormat.name is missing");
    const annotations = (doc.metadata && doc.metadata.annotations) || {};
    if (annotations["serving.kserve.io/deploymentMode"] === "ModelMesh") {
      const storage = model.storage || {};
      need((typeof storage.path === "string" && storage.path) || model.storageUri,
           "a ModelMesh predictor needs spec.predictor.model.storage.path (or storageUri)");
      seen.services.push({ name: doc.metadata.name, runtime: model.runtime, format: model.modelFormat.name,
                           modelMesh: true });
      return;
    }
    need(["v1", "v2", "grpc-v2"].includes(model.protocolVersion),
         "spec.predictor.model.protocolVersion must be v1 or v2 (REST) or grpc-v2");
    need(typeof model.storageUri === "string" && model.storageUri, "spec.predictor.model.storageUri is missing");
    const h2c = (model.ports || []).find((p) => p.name === "h2c");
    if (model.protocolVersion === "grpc-v2") {
      need(h2c, "a grpc-v2 predictor needs a port named h2c (the runtime's gRPC port)");
    }
    seen.services.push({ name: doc.metadata.name, runtime: model.runtime, format: model.modelFormat.name,
                         protocol: model.protocolVersion, h2c: h2c ? h2c.containerPort : null });
  },
};

// JSON with object keys sorted, so key order (which kustomize changes) does
// not matter.
// An OpenTelemetry Collector's config (a ConfigMap's config.yaml): every
// component a pipeline names is defined, and the OTLP receiver's ports.
function collectorConfig(text, name) {
  const config = yaml.load(text);
  need(config && config.service && config.service.pipelines, `${name}: no service.pipelines`);
  const traces = config.service.pipelines.traces;
  need(traces, `${name}: no traces pipeline`);
  for (const kind of ["receivers", "processors", "exporters"]) {
    for (const component of traces[kind] || []) {
      need(config[kind] && component in config[kind],
           `${name}: the traces pipeline names ${kind.slice(0, -1)} ${component}, which is not defined`);
    }
  }
  need((traces.receivers || []).length > 0 && (traces.exporters || []).length > 0,
       `${name}: the traces pipeline needs a receiver and an exporter`);
  const processors = traces.processors || [];
  need(processors[0] === "memory_limiter",
       `${name}: memory_limiter must be the first processor, or the collector can run out of memory`);
  const otlp = (config.receivers || {}).otlp;
  need(otlp && otlp.protocols && otlp.protocols.grpc, `${name}: no OTLP/gRPC receiver`);
  return { grpcPort: portOf(otlp.protocols.grpc.endpoint) };
}

// The servers' OTLP endpoint names a Service among the objects, on a port
// that reaches a collector's OTLP/gRPC receiver.
function checkTracing(seen) {
  for (const endpoint of seen.otlpEndpoints) {
    const m = /^https?:\/\/([^:/]+):(\d+)\/?$/.exec(endpoint.value);
    need(m, `${endpoint.where}: OTEL_EXPORTER_OTLP_ENDPOINT ${endpoint.value} is not http://SERVICE:PORT`);
    const [host, port] = [m[1].split(".")[0], Number(m[2])];
    const service = seen.k8sServices.find((s) => s.metadata.name === host);
    need(service, `${endpoint.where}: OTEL_EXPORTER_OTLP_ENDPOINT names Service ${host}, which is not defined`);
    const servicePort = service.spec.ports.find((p) => p.port === port);
    need(servicePort, `${endpoint.where}: Service ${host} has no port ${port}`);
    const selector = service.spec.selector || {};
    const deployment = seen.deployments.find((d) => Object.entries(selector).every(
      ([k, v]) => (d.spec.template.metadata.labels || {})[k] === v));
    need(deployment, `Service ${host} selects no Deployment`);
    const container = deployment.spec.template.spec.containers.find((c) => (c.ports || []).some(
      (p) => p.name === servicePort.targetPort || p.containerPort === servicePort.targetPort));
    need(container, `Service ${host} port ${port} reaches no container port of Deployment ${deployment.metadata.name}`);
    const containerPort = container.ports.find(
      (p) => p.name === servicePort.targetPort || p.containerPort === servicePort.targetPort).containerPort;
    need(seen.collectors.some((c) => c.grpcPort === containerPort),
         `Service ${host} port ${port} reaches container port ${containerPort}, where no collector config has ` +
         `its OTLP/gRPC receiver`);
  }
}

function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

function main() {
  const args = process.argv.slice(2);
  let rulesFile = null;
  const files = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--rules") rulesFile = args[++i];
    else files.push(args[i]);
  }
  let checked = 0;
  const seen = { runtimes: {}, services: [], otlpEndpoints: [], k8sServices: [], deployments: [], collectors: [] };
  for (const file of files) {
    const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d);
    if (docs.length === 0) throw new Error(`${file}: no objects`);
    for (const doc of docs) {
      const key = `${doc.apiVersion}/${doc.kind}`;
      const name = `${file}: ${doc.kind} ${doc.metadata && doc.metadata.name}`;
      if (kserveChecks[key]) {
        try {
          kserveChecks[key](doc, seen);
        } catch (e) {
          throw new Error(`${name} is invalid: ${e.message}`);
        }
        checked++;
        continue;
      }
      if (!models[key]) throw new Error(`${name}: no schema known for ${key}`);
      const Model = models[key]();
      try {
        new Model(doc).validate();
      } catch (e) {
        throw new Error(`${name} is invalid: ${e.message}`);
      }
      if (key === "v1/ConfigMap" && doc.data) {
        if (doc.data.OTEL_EXPORTER_OTLP_ENDPOINT) {
          seen.otlpEndpoints.push({ where: name, value: doc.data.OTEL_EXPORTER_OTLP_ENDPOINT });
        }
        if (doc.data["config.yaml"] && /^receivers:/m.test(doc.data["config.yaml"])) {
          seen.collectors.push(collectorConfig(doc.data["config.yaml"], name));
        }
      }
      if (key === "v1/Service") seen.k8sServices.push(doc);
      if (key === "apps/v1/Deployment") seen.deployments.push(doc);
      if (key.endsWith("/PrometheusRule") && rulesFile) {
        const want = yaml.load(fs.readFileSync(rulesFile, "utf8")).groups;
        if (canonical(doc.spec.groups) !== canonical(want)) {
          throw new Error(`${name}: spec.groups differ from ${rulesFile}`);
        }
      }
      checked++;
    }
  }
  for (const svc of seen.services) {
    if (!svc.runtime && !svc.modelMesh) {
      // KServe picks a runtime that auto-selects the format and speaks the protocol.
      const picked = Object.entries(seen.runtimes).find(
        ([, r]) => (r.autoSelect || []).includes(svc.format) && (r.protocols || []).includes(svc.protocol));
      need(picked, `InferenceService ${svc.name}: no runtime among the files checked auto-selects ` +
           `${svc.format} over ${svc.protocol}`);
      svc.runtime = picked[0];
    }
    if (!svc.runtime) continue;
    const runtime = seen.runtimes[svc.runtime];
    need(runtime, `InferenceService ${svc.name}: runtime ${svc.runtime} is not among the files checked`);
    need(runtime.formats.includes(svc.format),
         `InferenceService ${svc.name}: runtime ${svc.runtime} does not serve ${svc.format}`);
    need(Boolean(svc.modelMesh) === Boolean(runtime.modelMesh),
         `InferenceService ${svc.name}: ` + (svc.modelMesh ? `deploymentMode ModelMesh needs a multiModel runtime; ` +
         `${svc.runtime} is not one` : `runtime ${svc.runtime} is a ModelMesh runtime; set the annotation ` +
         `serving.kserve.io/deploymentMode: ModelMesh`));
    need(!runtime.protocols || runtime.protocols.includes(svc.protocol),
         `InferenceService ${svc.name}: runtime ${svc.runtime} does not speak ${svc.protocol}`);
    if (svc.protocol === "grpc-v2") {
      need(svc.h2c === runtime.grpcPort, `InferenceService ${svc.name}: its h2c port ${svc.h2c} is not runtime ` +
           `${svc.runtime}'s gRPC port ${runtime.grpcPort} (--address)`);
    }
  }
  checkTracing(seen);
  console.log(`validated ${checked} objects`);
}

try {
  main();
} catch (e) {
  console.error(`INVALID: ${e.message}`);
  process.exit(1);
}
