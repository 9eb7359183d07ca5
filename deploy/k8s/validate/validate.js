// Validates rendered Kubernetes manifests offline against the Kubernetes and
// Prometheus Operator schemas (kubernetes-models), and checks that the
// PrometheusRule carries exactly the rules of deploy/monitoring.
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
  "policy/v1/PodDisruptionBudget": () => require("kubernetes-models/policy/v1").PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": () => require("kubernetes-models/autoscaling/v2").HorizontalPodAutoscaler,
  "monitoring.coreos.com/v1/ServiceMonitor": () =>
    require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1").ServiceMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": () =>
    require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1").PrometheusRule,
};

// JSON with object keys sorted, so key order (which kustomize changes) does
// not matter.
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
  for (const file of files) {
    const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d);
    if (docs.length === 0) throw new Error(`${file}: no objects`);
    for (const doc of docs) {
      const key = `${doc.apiVersion}/${doc.kind}`;
      const name = `${file}: ${doc.kind} ${doc.metadata && doc.metadata.name}`;
      if (!models[key]) throw new Error(`${name}: no schema known for ${key}`);
      const Model = models[key]();
      try {
        new Model(doc).validate();
      } catch (e) {
        throw new Error(`${name} is invalid: ${e.message}`);
      }
      if (key.endsWith("/PrometheusRule") && rulesFile) {
        const want = yaml.load(fs.readFileSync(rulesFile, "utf8")).groups;
        if (canonical(doc.spec.groups) !== canonical(want)) {
          throw new Error(`${name}: spec.groups differ from ${rulesFile}`);
        }
      }
      checked++;
    }
  }
  console.log(`validated ${checked} objects`);
}

try {
  main();
} catch (e) {
  console.error(`INVALID: ${e.message}`);
  process.exit(1);
}
