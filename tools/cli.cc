// infergate-cli: talk to an infergate server.
//
//   infergate-cli [--address A] devices
//   infergate-cli [--address A] models
//   infergate-cli [--address A] health [--service NAME]
//   infergate-cli [--address A] infer --model NAME [--version V] [--device D]
//       [--precision P] [--input NAME=SHAPE:random|FILE]... [--repeat N]

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "inference/grpc_service.grpc.pb.h"
#include "infergate/v1/inference.grpc.pb.h"
#include "tools/bench.h"
#include "tools/bench_open_inference.h"
#include "tools/grpc_frame.h"

namespace v1 = infergate::v1;

namespace {

constexpr char kUsage[] =
    "infergate-cli: client for the infergate inference server.\n"
    "Usage:\n"
    "  infergate-cli [flags] devices\n"
    "  infergate-cli [flags] models\n"
    "  infergate-cli [flags] health [--service NAME]\n"
    "  infergate-cli [flags] infer --model NAME [--input NAME=SHAPE:random|FILE]...\n"
    "  infergate-cli [flags] bench --model NAME [--rows R] --concurrency N --duration S\n"
    "  infergate-cli [flags] bench --rpc health --concurrency N --duration S\n"
    "  infergate-cli [flags] bench --rpc v2|v2-stream --model NAME --concurrency N --duration S\n"
    "  infergate-cli [flags] frame --rpc infer|v2|health [--model NAME] --out FILE\n"
    "    writes one request as a gRPC length-prefixed message, after checking the\n"
    "    server answers those exact bytes OK; prints the method path (for h2load -d)\n"
    "SHAPE is dims joined by 'x' (1x256). FILE holds raw little-endian bytes.\n"
    "Without --input, every declared input is filled with random data, batch 1.";

struct CliOptions {
  infergate::tools::Connection connection;
  std::string model;
  std::string version;
  std::string device;
  std::string precision = "AUTO";
  std::string fallback = "ALLOW";
  std::vector<std::string> inputs;  // --input, once per input
  int64_t repeat = 1;
  int64_t rows = 1;
  int64_t concurrency = 8;
  double duration_s = 10;
  double warmup_s = 1;
  std::string rpc = "infer";
  std::string out;      // frame: file to write
  std::string service;  // health: "" (readiness), a service name, or "liveness"
  int64_t channels = 1;
  int64_t timeout_ms = 30000;
  int64_t show = 8;
};

size_t ElementBytes(v1::DataType t) {
  switch (t) {
    case v1::FLOAT64:
    case v1::INT64: return 8;
    case v1::FLOAT32:
    case v1::INT32: return 4;
    case v1::FLOAT16:
    case v1::BFLOAT16: return 2;
    default: return 1;
  }
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = exp == 0    ? std::ldexp(static_cast<float>(mant), -24)
            : exp == 31 ? (mant ? NAN : INFINITY)
                        : std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t FloatToHalf(float f) {
  // Round-to-nearest is not needed for random test data; truncation is fine.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3ff;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (exp << 10) | mant);
}

double ValueAt(const v1::Tensor& t, size_t i) {
  const char* p = t.data().data() + i * ElementBytes(t.dtype());
  switch (t.dtype()) {
    case v1::FLOAT32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case v1::FLOAT64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case v1::FLOAT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return HalfToFloat(v);
    }
    case v1::BFLOAT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      uint32_t w = uint32_t{v} << 16;
      float f;
      std::memcpy(&f, &w, 4);
      return f;
    }
    case v1::INT64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case v1::INT32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case v1::INT8: return static_cast<int8_t>(*p);
    case v1::UINT8:
    case v1::BOOL: return static_cast<uint8_t>(*p);
    default: return NAN;
  }
}

void FillRandom(v1::Tensor* t, size_t count, std::mt19937& rng) {
  std::string& data = *t->mutable_data();
  data.resize(count * ElementBytes(t->dtype()));
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(0, 9);
  for (size_t i = 0; i < count; ++i) {
    char* p = data.data() + i * ElementBytes(t->dtype());
    switch (t->dtype()) {
      case v1::FLOAT32: {
        float v = normal(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case v1::FLOAT64: {
        double v = normal(rng);
        std::memcpy(p, &v, 8);
        break;
      }
      case v1::FLOAT16: {
        uint16_t v = FloatToHalf(normal(rng));
        std::memcpy(p, &v, 2);
        break;
      }
      case v1::BFLOAT16: {
        float f = normal(rng);
        uint32_t w;
        std::memcpy(&w, &f, 4);
        uint16_t v = w >> 16;
        std::memcpy(p, &v, 2);
        break;
      }
      case v1::INT64: {
        int64_t v = small(rng);
        std::memcpy(p, &v, 8);
        break;
      }
      case v1::INT32: {
        int32_t v = small(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case v1::BOOL: *p = static_cast<char>(small(rng) & 1); break;
      default: *p = static_cast<char>(small(rng)); break;
    }
  }
}

bool ParseShape(absl::string_view text, std::vector<int64_t>* shape) {
  shape->clear();
  if (text.empty() || text == "scalar") return true;
  for (absl::string_view d : absl::StrSplit(text, absl::ByAnyChar("x,"))) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v < 0) return false;
    shape->push_back(v);
  }
  return true;
}

int Fail(const std::string& what) {
  std::cerr << "infergate-cli: " << what << "\n";
  return 2;
}

int RpcFail(const char* rpc, const grpc::Status& s) {
  std::cerr << "infergate-cli: " << rpc << " failed: code " << s.error_code() << " ("
            << static_cast<int>(s.error_code()) << "): " << s.error_message() << "\n";
  return 1;
}

std::unique_ptr<grpc::ClientContext> Context(const CliOptions& o) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.timeout_ms));
  infergate::tools::Authorize(*ctx, o.connection);
  return ctx;
}

std::string MiB(uint64_t b) { return absl::StrCat(b / (1024 * 1024), " MiB"); }

int Devices(v1::InferenceService::Stub& stub, const CliOptions& o) {
  v1::ListDevicesResponse resp;
  grpc::Status s = stub.ListDevices(Context(o).get(), v1::ListDevicesRequest(), &resp);
  if (!s.ok()) return RpcFail("ListDevices", s);
  for (const v1::DeviceInfo& d : resp.devices()) {
    std::cout << d.id() << "\t" << d.name() << (d.simulated() ? " (simulated)" : "")
              << "\n  available: " << (d.available() ? "yes" : "no")
              << (d.backend_detail().empty() ? "" : "  backend: " + d.backend_detail())
              << "  default precision: " << v1::Precision_Name(d.default_precision());
    if (d.logical_cores()) std::cout << "  logical cores: " << d.logical_cores();
    if (!d.compute_capability().empty()) std::cout << "  compute capability: " << d.compute_capability();
    std::cout << "\n  memory: " << MiB(d.memory_used_bytes()) << " used of " << MiB(d.memory_total_bytes())
              << "\n  queue depth: " << d.queue_depth() << "  in flight: " << d.in_flight() << "\n";
    std::vector<std::string> dtypes;
    for (int t : d.supported_dtypes()) dtypes.push_back(v1::DataType_Name(static_cast<v1::DataType>(t)));
    std::cout << "  dtypes: " << absl::StrJoin(dtypes, " ") << "\n";
    if (d.resident_models_size()) std::cout << "  resident: " << absl::StrJoin(d.resident_models(), ", ") << "\n";
    if (d.unsupported_ops_size())
      std::cout << "  unsupported ops: " << absl::StrJoin(d.unsupported_ops(), ", ") << "\n";
  }
  return 0;
}

std::string SpecText(const v1::TensorSpec& s, bool batched) {
  std::vector<std::string> dims;
  if (batched) dims.push_back("-1");
  for (int64_t d : s.dims()) dims.push_back(absl::StrCat(d));
  return absl::StrCat(s.name(), " ", v1::DataType_Name(s.dtype()), " [", absl::StrJoin(dims, ","), "]");
}

int Models(v1::InferenceService::Stub& stub, const CliOptions& o) {
  v1::ListModelsResponse resp;
  grpc::Status s = stub.ListModels(Context(o).get(), v1::ListModelsRequest(), &resp);
  if (!s.ok()) return RpcFail("ListModels", s);
  for (const v1::ModelInfo& m : resp.models()) {
    const v1::ModelConfig& c = m.config();
    std::cout << m.name() << "\tversions: " << absl::StrJoin(m.versions(), ",")
              << "\tmax_batch_size: " << c.max_batch_size() << "\n";
    if (!c.description().empty()) std::cout << "  " << c.description() << "\n";
    for (const auto& in : c.inputs()) std::cout << "  input  " << SpecText(in, c.max_batch_size() > 0) << "\n";
    for (const auto& out : c.outputs()) std::cout << "  output " << SpecText(out, c.max_batch_size() > 0) << "\n";
    for (const v1::ModelVersionStatus& v : m.version_status()) {
      std::cout << "  version " << v.version() << ": " << v1::ModelVersionState_Name(v.state())
                << (v.format().empty() ? "" : ", " + v.format()) << (v.reason().empty() ? "" : " (" + v.reason() + ")")
                << "\n";
    }
    for (const auto& l : m.loaded()) {
      std::cout << "  loaded v" << l.version() << " on " << l.device() << " as " << v1::DataType_Name(l.dtype())
                << "\n";
    }
    for (const v1::PrecisionCheck& check : m.precision_checks()) {
      std::cout << "  accuracy v" << check.version() << " on " << check.device() << " in "
                << v1::DataType_Name(check.dtype()) << ": " << check.state()
                << (check.detail().empty() ? "" : " (" + check.detail() + ")") << "\n";
    }
  }
  return 0;
}

// Builds the request `infer` and `bench` send; returns 0 or an exit code.
int BuildRequest(v1::InferenceService::Stub& stub, const CliOptions& o, const std::vector<std::string>& inputs,
                 v1::InferRequest& req) {
  if (o.model.empty()) return Fail("needs --model NAME");
  req.set_model(o.model);
  req.set_version(o.version);
  req.set_device(o.device);
  v1::Precision precision;
  if (!v1::Precision_Parse(o.precision, &precision)) return Fail("--precision: expected AUTO, FP32, FP16 or BF16");
  req.set_precision(precision);
  v1::FallbackPolicy fallback;
  if (!v1::FallbackPolicy_Parse(o.fallback, &fallback)) return Fail("--fallback: expected ALLOW or DENY");
  req.set_fallback(fallback);

  // Declared inputs tell the dtype (and the shape when --input is omitted).
  v1::ListModelsResponse models;
  grpc::Status ls = stub.ListModels(Context(o).get(), v1::ListModelsRequest(), &models);
  if (!ls.ok()) return RpcFail("ListModels", ls);
  const v1::ModelConfig* config = nullptr;
  for (const auto& m : models.models()) {
    if (m.name() == o.model) config = &m.config();
  }
  if (!config) {
    return Fail(absl::StrCat("--model: '", o.model, "' is not a model this server has (see `infergate-cli models`)"));
  }
  auto declared = [&](const std::string& name) -> const v1::TensorSpec* {
    if (!config) return nullptr;
    for (const auto& s : config->inputs()) {
      if (s.name() == name) return &s;
    }
    return nullptr;
  };
  std::mt19937 rng(42);
  std::vector<std::string> specs = inputs;
  if (specs.empty()) {
    for (const auto& s : config->inputs()) {
      std::vector<std::string> dims;
      if (config->max_batch_size() > 0) dims.push_back(absl::StrCat(o.rows));
      for (int64_t d : s.dims()) dims.push_back(absl::StrCat(d < 0 ? 1 : d));
      specs.push_back(absl::StrCat(s.name(), "=", absl::StrJoin(dims, "x"), ":random"));
    }
  }
  if (specs.empty()) return Fail("infer needs --input NAME=SHAPE:random|FILE (the model declares no inputs)");
  for (const std::string& spec : specs) {
    size_t eq = spec.find('='), colon = spec.rfind(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq) {
      return Fail(absl::StrCat("--input '", spec, "': expected NAME=SHAPE:random or NAME=SHAPE:FILE"));
    }
    v1::Tensor* t = req.add_inputs();
    t->set_name(spec.substr(0, eq));
    std::vector<int64_t> shape;
    if (!ParseShape(spec.substr(eq + 1, colon - eq - 1), &shape)) {
      return Fail(absl::StrCat("--input '", spec, "': bad shape"));
    }
    for (int64_t d : shape) t->add_shape(d);
    const v1::TensorSpec* d = declared(t->name());
    t->set_dtype(d ? d->dtype() : v1::FLOAT32);
    size_t count = 1;
    for (int64_t dim : shape) count *= static_cast<size_t>(dim);
    std::string source = spec.substr(colon + 1);
    if (source == "random") {
      FillRandom(t, count, rng);
    } else {
      absl::StatusOr<std::string> bytes = infergate::ReadFile(source, absl::StrCat("--input '", spec, "'"));
      if (!bytes.ok()) return Fail(std::string(bytes.status().message()));
      t->set_data(*std::move(bytes));
    }
  }
  return 0;
}

int Infer(v1::InferenceService::Stub& stub, const CliOptions& o, const std::vector<std::string>& inputs) {
  v1::InferRequest req;
  if (int rc = BuildRequest(stub, o, inputs, req); rc != 0) return rc;
  std::vector<double> latencies_us;
  v1::InferResponse resp;
  for (int64_t i = 0; i < std::max<int64_t>(1, o.repeat); ++i) {
    resp.Clear();
    req.set_request_id(absl::StrCat("cli-", i));
    auto start = std::chrono::steady_clock::now();
    grpc::Status s = stub.Infer(Context(o).get(), req, &resp);
    auto end = std::chrono::steady_clock::now();
    if (!s.ok()) return RpcFail("Infer", s);
    latencies_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  for (const v1::Tensor& t : resp.outputs()) {
    size_t count = 1;
    for (int64_t d : t.shape()) count *= static_cast<size_t>(d);
    std::cout << "output " << t.name() << " " << v1::DataType_Name(t.dtype()) << " [" << absl::StrJoin(t.shape(), ",")
              << "]:";
    for (size_t i = 0; i < std::min<size_t>(count, static_cast<size_t>(o.show)); ++i) std::cout << " " << ValueAt(t, i);
    if (count > static_cast<size_t>(o.show)) std::cout << " ...";
    std::cout << "\n";
  }
  const v1::Placement& p = resp.placement();
  std::cout << "placement: device=" << p.device()
            << " requested=" << (p.requested_device().empty() ? "\"\"" : p.requested_device())
            << " dtype=" << v1::DataType_Name(p.dtype()) << " batch_size=" << p.batch_size()
            << " version=" << p.model_version() << " fell_back=" << (p.fell_back() ? "true" : "false");
  if (p.fell_back()) std::cout << " reason=" << p.fallback_reason();
  if (!p.precision_reason().empty()) std::cout << " precision_reason=\"" << p.precision_reason() << "\"";
  std::cout << "\ntiming: queue_us=" << resp.timing().queue_us() << " compute_us=" << resp.timing().compute_us()
            << " total_us=" << resp.timing().total_us() << "\n";
  if (latencies_us.size() > 1) {
    std::sort(latencies_us.begin(), latencies_us.end());
    auto pct = [&](double q) { return latencies_us[static_cast<size_t>(q * (latencies_us.size() - 1))]; };
    std::cout << "client latency over " << latencies_us.size() << " calls: p50=" << pct(0.5) << "us p90=" << pct(0.9)
              << "us p99=" << pct(0.99) << "us\n";
  }
  return 0;
}

// Asks the standard gRPC health service, as a Kubernetes probe would, and
// exits 0 only when the answer is SERVING: usable as an exec probe.
int Health(const std::shared_ptr<grpc::Channel>& channel, const CliOptions& o) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.timeout_ms));
  if (!o.connection.token.empty()) ctx.AddMetadata("authorization", "Bearer " + o.connection.token);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(o.service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) return Fail(absl::StrCat("health check failed: ", s.error_message()));
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()) << "\n";
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

int Bench(v1::InferenceService::Stub& stub, const CliOptions& o, const std::vector<std::string>& inputs) {
  infergate::tools::BenchOptions b;
  b.connection = o.connection;
  b.rpc = o.rpc;
  b.concurrency = static_cast<int>(std::max<int64_t>(1, o.concurrency));
  b.channels = static_cast<int>(std::max<int64_t>(1, o.channels));
  b.timeout_ms = o.timeout_ms;
  b.duration_s = o.duration_s;
  b.warmup_s = o.warmup_s;
  if (b.duration_s <= 0) return Fail("--duration: seconds > 0");
  if (b.warmup_s < 0) return Fail("--warmup: seconds >= 0");
  v1::InferRequest req;
  const bool open_inference = b.rpc == "v2" || b.rpc == "v2-stream";
  if (b.rpc == "infer" || open_inference) {
    if (int rc = BuildRequest(stub, o, inputs, req); rc != 0) return rc;
  } else if (b.rpc != "health") {
    return Fail("--rpc: expected infer, v2, v2-stream or health");
  }
  infergate::tools::BenchResult r =
      open_inference
          ? infergate::tools::RunOpenInferenceBench(b, infergate::tools::ToOpenInference(req), b.rpc == "v2-stream")
          : infergate::tools::RunBench(b, req);
  std::cout << "bench rpc=" << b.rpc << (b.rpc != "health" ? " model=" + o.model : "")
            << " concurrency=" << b.concurrency << " " << r.Summary() << "\n";
  return r.ok > 0 ? 0 : 1;
}

// One pre-encoded request for a load client that replays bytes (h2load).
int Frame(v1::InferenceService::Stub& stub, const std::shared_ptr<grpc::Channel>& channel, const CliOptions& o) {
  if (o.out.empty()) return Fail("frame: needs --out FILE");
  std::string method;
  std::unique_ptr<google::protobuf::Message> message;
  if (o.rpc == "health") {
    method = absl::StrCat("/", grpc::health::v1::Health::service_full_name(), "/Check");
    message = std::make_unique<grpc::health::v1::HealthCheckRequest>();
  } else if (o.rpc == "infer" || o.rpc == "v2") {
    v1::InferRequest req;
    if (int rc = BuildRequest(stub, o, o.inputs, req); rc != 0) return rc;
    if (o.rpc == "infer") {
      method = absl::StrCat("/", v1::InferenceService::service_full_name(), "/Infer");
      message = std::make_unique<v1::InferRequest>(std::move(req));
    } else {
      method = absl::StrCat("/", inference::GRPCInferenceService::service_full_name(), "/ModelInfer");
      message = std::make_unique<inference::ModelInferRequest>(infergate::tools::ToOpenInference(req));
    }
  } else {
    return Fail("frame: --rpc: expected infer, v2 or health");
  }
  absl::StatusOr<std::string> frame =
      infergate::tools::SendAndFrame(channel, o.connection, method, *message, o.timeout_ms);
  if (!frame.ok()) return Fail(std::string(frame.status().message()));
  if (absl::Status written = infergate::WriteFileAtomically(o.out, *frame); !written.ok()) {
    return Fail(absl::StrCat("frame: --out: ", written.message()));
  }
  std::cout << "frame rpc=" << o.rpc << " path=" << method << " bytes=" << frame->size() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CliOptions o;
  infergate::FlagSet flags(kUsage);
  flags.String("address", &o.connection.address, "Server address, HOST:PORT or dns:///HOST:PORT.");
  flags.String("lb", &o.connection.lb, "Load-balancing policy for several resolved addresses, e.g. round_robin.");
  flags.String("tls-ca", &o.connection.tls_ca, "PEM CA to verify the server with; enables TLS.");
  flags.String("tls-cert", &o.connection.tls_cert, "PEM client certificate for mutual TLS.");
  flags.String("tls-key", &o.connection.tls_key, "PEM client key for mutual TLS.");
  flags.String("tls-server-name", &o.connection.tls_server_name, "Name to check in the server certificate.");
  flags.String("token", &o.connection.token, "Bearer token sent as authorization metadata.");
  flags.String("model", &o.model, "infer: model name.");
  flags.String("version", &o.version, "infer: model version; empty for the latest.");
  flags.String("device", &o.device, "infer: \"\", auto, cpu, cuda, cuda:N or mps.");
  flags.String("precision", &o.precision, "infer: AUTO, FP32, FP16 or BF16.");
  flags.String("fallback", &o.fallback, "infer: ALLOW or DENY.");
  flags.Repeated("input", &o.inputs, "infer: NAME=SHAPE:random|FILE; repeat for each input.");
  flags.Int("repeat", &o.repeat, "infer: send the request this many times and print latency percentiles.");
  flags.Int("timeout-ms", &o.timeout_ms, "Deadline of each call.");
  flags.Int("show", &o.show, "infer: how many values of each output to print.");
  flags.Int("rows", &o.rows, "infer/bench: rows per request for generated inputs of batchable models.");
  flags.Int("concurrency", &o.concurrency, "bench: calls kept outstanding.");
  flags.Double("duration", &o.duration_s, "bench: seconds to measure.");
  flags.Double("warmup", &o.warmup_s, "bench: seconds to run before measuring.");
  flags.String("rpc", &o.rpc,
               "bench: infer (infergate.v1), v2 (Open Inference ModelInfer), v2-stream (ModelStreamInfer), or health "
               "for the gRPC floor.");
  flags.String("service", &o.service,
               "health: service to ask for; \"\" is readiness, \"liveness\" stays SERVING during a drain.");
  flags.String("out", &o.out, "frame: file to write the framed request to.");
  flags.Int("channels", &o.channels, "bench: gRPC channels (connections) to spread calls over.");
  bool help = false;
  auto positional = flags.Parse(argc, argv, &help);
  if (!positional.ok()) return Fail(std::string(positional.status().message()));
  if (help || positional->empty()) {
    std::cout << flags.Help();
    return help ? 0 : 2;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = infergate::tools::MakeChannel(o.connection);
  if (!channel.ok()) return Fail(std::string(channel.status().message()));
  auto stub = v1::InferenceService::NewStub(*channel);
  const std::string& command = positional->front();
  if (command == "devices") return Devices(*stub, o);
  if (command == "models") return Models(*stub, o);
  if (command == "infer") return Infer(*stub, o, o.inputs);
  if (command == "bench") return Bench(*stub, o, o.inputs);
  if (command == "health") return Health(*channel, o);
  if (command == "frame") return Frame(*stub, *channel, o);
  return Fail(absl::StrCat("unknown command '", command, "'; expected devices, models, infer, bench, frame or health"));
}
