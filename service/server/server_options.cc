#include "service/server/server_options.h"

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "scheduler/repository/model_config.h"

namespace infergate {
namespace {

// Flags that are text on the command line and typed options once parsed.
struct RawFlags {
  int64_t cpu_workers = 0;
  int64_t accelerator_workers = 1;
  int64_t intra_op_threads = 0;
  int64_t queue_capacity = 1024;
  int64_t worker_spin_us = 200;
  int64_t max_tensor_rank = 8;
  int64_t max_tensor_elements = int64_t{1} << 28;
  int64_t max_string_elements = int64_t{1} << 20;
  int64_t max_reads_per_address = 64;
  bool batching = true;
  bool fair_queueing = true;
  bool precision_checks = true;
  bool background_moves = true;
  bool load_and_run = true;
  bool load_and_run_displaces = false;
  bool load_on_arrival = true;
  bool load_and_run_reserves = true;
  double staging_share = 0.5;
  std::chrono::milliseconds staging_demand_window{2000};
  double host_copy_share = 0.5;
  std::chrono::milliseconds move_window{10000};
  double move_hysteresis = 1.5;
  std::string move_objective = "tail";
  std::chrono::milliseconds move_min_residence{5000};
  std::chrono::milliseconds move_period{1000};
  std::chrono::milliseconds demand_window{10000};
  double demand_change_threshold = 5;
  double simulate_cpu_slowdown = 1;
  std::chrono::milliseconds priority_aging{100};
  std::string cache_budget;  // "cpu=8GiB,cuda:0=20GiB"
  std::string state_file;
  std::chrono::milliseconds device_failure_cooldown{30000};
  std::chrono::milliseconds repository_poll_interval{5000};
  std::string model_control_mode;            // "" (infergate's own), none, poll, explicit
  std::string load_model;                    // explicit mode's models at start, comma-separated; "*" every one
  std::string devices;                       // allow-list; empty = all
  std::string simulate_devices;              // e.g. "mps,cuda:0=2GiB@7.5"
  std::string simulate_mps_unsupported_ops;  // empty = the default list
  std::string simulate_failing_devices;
  int64_t simulate_failures_after = 0;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string reflection = "auto";
  std::string io_thread_policy = "batch";
  int64_t http_threads = 2;
};

using Ms = std::chrono::milliseconds;

// A flag's rule from a predicate on its value and what the value must be.
template <typename T, typename Ok>
FlagSet::Rule<T> Must(Ok ok, std::string must) {
  return [ok, must = std::move(must)](const T& v) { return ok(v) ? std::string() : must; };
}

// gRPC keeps connection times in 32-bit milliseconds.
FlagSet::Rule<Ms> UnderGrpcsLimit() {
  return Must<Ms>([](Ms v) { return v.count() <= INT32_MAX; }, "must be under 24 days");
}

FlagSet::Rule<Ms> HandshakeTimeoutRule() {
  return [under = UnderGrpcsLimit()](const Ms& v) {
    if (std::string broken = under(v); !broken.empty()) return broken;
    return v.count() > 0 ? std::string() : std::string("must be positive");
  };
}

FlagSet::Rule<Ms> NotNegative() {
  return Must<Ms>([](Ms v) { return v.count() >= 0; }, "must not be negative");
}

// Triton's --model-control-mode and --load-model on the scheduler's
// options: none never polls and refuses loads; poll polls (at
// --repository-poll-interval, which must not be 0) and refuses loads;
// explicit never polls and serves the --load-model models from the start.
absl::Status ModelControlFrom(const RawFlags& f, SchedulerOptions* s) {
  using Mode = SchedulerOptions::ModelControl;
  std::vector<std::string> names = absl::StrSplit(f.load_model, ',', absl::SkipWhitespace());
  for (std::string& name : names) name = std::string(absl::StripAsciiWhitespace(name));
  if (f.model_control_mode.empty()) {
    s->model_control = Mode::kFollow;
  } else if (f.model_control_mode == "none") {
    s->model_control = Mode::kNone;
    s->repository_poll_interval = Ms(0);
  } else if (f.model_control_mode == "poll") {
    s->model_control = Mode::kPoll;
    if (f.repository_poll_interval.count() == 0) {
      return absl::InvalidArgumentError("--model-control-mode=poll: --repository-poll-interval must not be 0");
    }
  } else if (f.model_control_mode == "explicit") {
    s->model_control = Mode::kExplicit;
    s->repository_poll_interval = Ms(0);
    s->initial_models = std::move(names);
    return absl::OkStatus();
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--model-control-mode: must be none, poll or explicit, got '",
                                                   f.model_control_mode.substr(0, 32), "'"));
  }
  if (!names.empty()) {
    return absl::InvalidArgumentError(
        "--load-model: only with --model-control-mode=explicit (the other modes serve "
        "every model in the repository)");
  }
  return absl::OkStatus();
}

absl::StatusOr<SchedulerOptions> SchedulerFrom(const RawFlags& f) {
  SchedulerOptions s;
  s.cpu_workers = static_cast<int>(f.cpu_workers);
  s.accelerator_workers = static_cast<int>(f.accelerator_workers);
  s.intra_op_threads = static_cast<int>(f.intra_op_threads);
  s.queue_capacity = static_cast<size_t>(f.queue_capacity);
  s.batching = f.batching;
  s.fair_queueing = f.fair_queueing;
  s.precision_checks = f.precision_checks;
  s.background_moves = f.background_moves;
  s.host_copy_share = f.host_copy_share;
  s.load_and_run_displaces = f.load_and_run_displaces;
  s.router.load_and_run = f.load_and_run;
  s.router.load_on_arrival = f.load_on_arrival;
  s.router.load_and_run_reserves = f.load_and_run_reserves;
  s.staging_share = f.staging_share;
  s.staging_demand_window = f.staging_demand_window;
  s.placement.window_s = std::chrono::duration<double>(f.move_window).count();
  s.placement.hysteresis = f.move_hysteresis;
  s.demand.window = f.demand_window;
  s.demand.change_threshold = f.demand_change_threshold;
  if (f.move_objective == "tail") {
    s.placement.objective = MoveObjective::kTail;
  } else if (f.move_objective == "mean") {
    s.placement.objective = MoveObjective::kMean;
  } else if (f.move_objective == "tail-set") {
    s.placement.objective = MoveObjective::kTailSet;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--move-objective: must be tail, tail-set or mean, got '", f.move_objective, "'"));
  }
  s.placement.min_residence_s = std::chrono::duration<double>(f.move_min_residence).count();
  s.placement.period = f.move_period;
  if (f.simulate_cpu_slowdown > 1 && f.simulate_devices.empty()) {
    return absl::InvalidArgumentError("--simulate-cpu-slowdown: only with --simulate-devices (it is a simulation)");
  }
  s.simulated_cpu_slowdown = f.simulate_cpu_slowdown;
  s.priority_aging = f.priority_aging;
  s.worker_spin_us = static_cast<int>(std::clamp<int64_t>(f.worker_spin_us, 0, 10000));
  s.state_file = f.state_file;
  s.device_failure_cooldown = f.device_failure_cooldown;
  s.repository_poll_interval = f.repository_poll_interval;
  RETURN_IF_ERROR(ModelControlFrom(f, &s));
  s.max_tensor_elements = f.max_tensor_elements;
  for (absl::string_view entry : absl::StrSplit(f.cache_budget, ',', absl::SkipWhitespace())) {
    size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--cache-budget: '", entry, "' is not DEVICE=SIZE"));
    }
    ASSIGN_OR_RETURN(DeviceRequest dev, ParseDeviceRequest(entry.substr(0, eq), "--cache-budget"));
    if (dev.automatic || dev.any_index) {
      return absl::InvalidArgumentError(absl::StrCat("--cache-budget: '", entry, "' must name one device"));
    }
    absl::StatusOr<uint64_t> bytes = ParseByteSize(entry.substr(eq + 1));
    if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat("--cache-budget: ", bytes.status().message()));
    s.cache_budgets[DeviceId{dev.kind, dev.kind == DeviceKind::kCuda ? dev.index : 0}] = *bytes;
  }
  return s;
}

absl::StatusOr<DiscoveryOptions> DiscoveryFrom(const RawFlags& f) {
  DiscoveryOptions d;
  ASSIGN_OR_RETURN(d.allow, ParseDeviceAllowList(f.devices));
  ASSIGN_OR_RETURN(d.simulated, ParseSimulatedDevices(f.simulate_devices));
  if (!f.simulate_mps_unsupported_ops.empty()) {
    d.mps_unsupported_ops.clear();
    for (absl::string_view op : absl::StrSplit(f.simulate_mps_unsupported_ops, ',', absl::SkipWhitespace())) {
      op = absl::StripAsciiWhitespace(op);
      if (!absl::StartsWith(op, "aten::")) {
        return absl::InvalidArgumentError(
            absl::StrCat("--simulate-mps-unsupported-ops: '", op, "' is not an aten op such as aten::max_pool2d"));
      }
      d.mps_unsupported_ops.emplace_back(op);
    }
  }
  d.nvml_library = f.nvml_library;
  absl::StatusOr<std::vector<DeviceRequest>> failing = ParseDeviceAllowList(f.simulate_failing_devices);
  if (!failing.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--simulate-failing-devices: ", failing.status().message()));
  }
  for (const DeviceRequest& r : *failing) {
    DeviceId id{r.kind, r.kind == DeviceKind::kCuda ? r.index : 0};
    bool simulated = false;
    for (const SimulatedDeviceSpec& s : d.simulated) simulated |= s.id == id;
    if (!simulated || r.any_index) {
      return absl::InvalidArgumentError(
          absl::StrCat("--simulate-failing-devices: ", id.ToString(), " is not in --simulate-devices"));
    }
    d.failing.push_back(id);
  }
  d.fail_after_runs = std::max<int64_t>(0, f.simulate_failures_after);
  return d;
}

// Where the server serves from and how it starts and stops: its gRPC address, the model repository (or a
// TorchServe model store), the log level.
void AddServingFlags(FlagSet& flags, ServerOptions& o, RawFlags& f) {
  flags.String("address", &o.address, "HOST:PORT to serve gRPC on; port 0 picks a free one.");
  flags.String("model-repository", &o.model_repository,
               "Folder of <model>/config.pbtxt and <model>/<version>/model.pt (or model.pt2), Triton's layout, or "
               "a TorchServe model store: config/config.properties with model-store/*.mar (KServe's /mnt/models), "
               "or a folder of .mar files.");
  flags.ByteSize("mar-max-bytes", &o.mar_max_bytes,
                 "The most a TorchServe model store's archives (.mar) may extract to, all together; an archive "
                 "that would pass what is left is refused, and nothing of it is kept.");
  flags.Bool("torchserve-addresses", &o.torchserve_addresses,
             "Serve on the addresses a TorchServe config.properties names: inference_address for REST, "
             "grpc_inference_port for gRPC, metrics_address for metrics (they replace --http-address, --address "
             "and --metrics-address).");
  flags.Bool("torchserve-metrics", &o.torchserve_metrics,
             "Also export TorchServe's metric names (ts_inference_requests_total, "
             "ts_inference_latency_microseconds, ts_queue_latency_microseconds) beside infergate's, for dashboards "
             "built on TorchServe.");
  flags.Duration("repository-poll-interval", &f.repository_poll_interval,
                 "How often the model repository is checked for new, changed and removed models and versions "
                 "(stat() calls only); a change is acted on once it has held still for one interval. 0 disables: "
                 "LoadModel then re-reads a model's folder.",
                 NotNegative());
  flags.String("model-control-mode", &f.model_control_mode,
               "Triton's model control: none (the repository as it was at start; loads and unloads refused), poll "
               "(the repository followed every --repository-poll-interval; loads and unloads refused) or explicit "
               "(only --load-model's models served at start, the repository not followed; loads and unloads "
               "served). Unset: the repository is followed and loads and unloads are served too.");
  flags.String("load-model", &f.load_model,
               "With --model-control-mode=explicit: the models served from the start, comma-separated; * for every "
               "one. A name the repository lacks stops the server.");
  flags.Duration("drain-timeout", &o.drain_timeout,
                 "On SIGTERM/SIGINT, how long queued and running requests may take to finish (e.g. 30s, 500ms).");
  flags.Duration("stuck-batch-timeout", &o.stuck_batch_timeout,
                 "Liveness (health service \"liveness\") turns NOT_SERVING while a batch has run longer than this, so "
                 "Kubernetes restarts a server whose model hangs; 0 disables.");
  flags.String("state-file", &f.state_file,
               "File keeping what the server learned a device cannot run (MPS ops), so a restart remembers it.");
  flags.String("log-level", &o.log_level, "debug, info, warning or error.");
}

// What a request may bring and how much the server holds at once: message sizes, the in-flight budget, how
// requests must arrive, tensor limits, uploads.
void AddIntakeFlags(FlagSet& flags, ServerOptions& o, RawFlags& f) {
  flags.ByteSize("max-receive-bytes", &o.max_receive_bytes,
                 "Largest request message accepted (e.g. 64MiB); larger ones get RESOURCE_EXHAUSTED.",
                 Must<uint64_t>([](uint64_t v) { return v >= 1024 && v <= (uint64_t{2} << 30) - 1; },
                                "must be between 1024 and 2147483647"));
  flags.ByteSize("max-inflight-bytes", &o.max_inflight_bytes,
                 "Bytes of inference requests held at once (queued or running); beyond it RESOURCE_EXHAUSTED. 0 picks "
                 "a quarter of the container's memory limit, or of the host's memory.");
  flags.ByteSize("min-receive-rate", &o.min_receive_rate,
                 "The slowest a gRPC request's message may arrive, in bytes a second after a 5 s grace (e.g. 1MiB); "
                 "a slower one is refused RESOURCE_EXHAUSTED and its room in --max-inflight-bytes given back.",
                 Must<uint64_t>([](uint64_t v) { return v >= 1024; }, "must be at least 1KiB (bytes a second)"));
  flags.Int("max-reads-per-address", &f.max_reads_per_address,
            "gRPC request messages one client address (its host, whatever the port) may have being read at once; "
            "more wait their turn.",
            InRange(1, 100000));
  flags.Int("max-tensor-rank", &f.max_tensor_rank, "Largest rank accepted for an input tensor.", InRange(1, 64));
  flags.Int("max-tensor-elements", &f.max_tensor_elements, "Largest element count accepted for an input tensor.",
            Must<int64_t>([](int64_t v) { return v >= 1 && v <= CodecLimits::kElementsCeiling; },
                          absl::StrCat("must be 1..", CodecLimits::kElementsCeiling,
                                       " (2^60, so a tensor's size in bytes fits 64 bits)")));
  flags.Int("max-string-elements", &f.max_string_elements,
            "The most string elements one request may carry, all its BYTES inputs together; counted on the wire "
            "before anything is parsed (each is an object of its own once parsed, whatever its length).",
            Must<int64_t>([](int64_t v) { return v >= 1 && v <= (int64_t{1} << 40); }, "must be 1..2^40"));
  flags.ByteSize("max-load-file-bytes", &o.max_load_file_bytes,
                 "Bytes of model files one load may carry (Triton's file: load parameters), written to a private "
                 "folder and served from there; 0 (the default) refuses such loads. Loads need an admin token "
                 "(or --open-admin-api).");
  flags.Bool("allow-native-uploads", &o.allow_native_uploads,
             "Let the files a load carries be native code: an AOTInductor package (.pt2) or a shared library, "
             "which the server loads and runs as its own user. Off: such files are refused.");
}

// How requests are run: workers and threads, queues, batching, fairness, precision, the model cache and
// background moves.
void AddSchedulingFlags(FlagSet& flags, ServerOptions& o, RawFlags& f) {
  flags.Int("cpu-workers", &f.cpu_workers, "Threads running models on the CPU; 0 picks min(cores, 4).",
            InRange(0, 256));
  flags.Int("accelerator-workers", &f.accelerator_workers,
            "Workers per GPU or MPS device, each with a stream of its own, so batches overlap on the device "
            "(as Triton's instance_group count); one model runs at most this many batches there at once.",
            InRange(1, kMaxAcceleratorInstances));
  flags.Int("intra-op-threads", &f.intra_op_threads, "LibTorch intra-op threads; 0 picks cores / cpu-workers.",
            InRange(0, 1024));
  flags.Int("queue-capacity", &f.queue_capacity, "Requests that may wait per device; more get RESOURCE_EXHAUSTED.",
            Must<int64_t>([](int64_t v) { return v >= 1; }, "must be at least 1"));
  flags.Int(
      "worker-spin-us", &f.worker_spin_us,
      "Microseconds an idle worker polls its queue before sleeping, yielding the core to any thread that has work "
      "meanwhile; trades CPU for latency.");
  flags.Bool("batching", &f.batching, "Dynamic batching for models whose config sets max_batch_size > 1.");
  flags.Bool("fair-queueing", &f.fair_queueing,
             "Models share each device by device time, so one model's flood does not queue another's requests "
             "behind it; false serves requests in arrival order (FIFO).");
  flags.Duration("priority-aging", &f.priority_aging,
                 "A waiting request's priority level improves by one per this much waiting, so low priority is "
                 "delayed, never starved; 0 disables aging.");
  flags.Bool("precision-checks", &f.precision_checks,
             "Serve a model in FP16 or BF16 on a device only after a check against FP32 on the CPU passed within "
             "the model's accuracy tolerance (until then, and after a failed check, the nearest verified dtype "
             "serves); false uses every precision unchecked.");
  flags.String("cache-budget", &f.cache_budget,
               "Model cache budget per device, e.g. \"cpu=8GiB,cuda:0=20GiB\"; least-recently-used idle, unpinned "
               "models are evicted to stay under it.");
  flags.ByteSize("cpu-tensor-cache", &o.cpu_tensor_cache_bytes,
                 "Freed CPU tensor blocks of 64 KiB and more kept for reuse, at most this many bytes (e.g. 256MiB), "
                 "so a model's activations are not faulted in afresh on every request; 0 leaves LibTorch's own "
                 "allocator.");
  flags.Bool("background-moves", &f.background_moves,
             "No cold start: auto runs a request where its model is ready, never waiting for a load while a copy "
             "is ready elsewhere; models are moved onto the accelerators in the background when their demand "
             "gains more than the move costs, and a model that gives up its room keeps a CPU copy that answers "
             "meanwhile (reason demoted:DEVICE). false: evict and reload (a request may wait for its model's load).");
  flags.Double("host-copy-share", &f.host_copy_share,
               "Host copies of loaded weights: a TorchScript model loaded onto an accelerator keeps its weights "
               "as read in host memory, up to this share of the cpu's cache budget (counted in it), and its later "
               "loads (back onto the accelerator, or its cpu copy when demoted) start from there instead of "
               "reading and deserialising the file. 0: off.",
               Must<double>([](double v) { return v >= 0 && v <= 1; }, "must be 0..1"));
  flags.Bool("load-and-run", &f.load_and_run,
             "No cold start: a request whose model is not on its best accelerator may load it there and run "
             "when that is expected to finish before the ready copy elsewhere (the staging share's room is "
             "for such loads). false: the previous rule, never waiting for a load while a copy is ready "
             "(no staging share), kept to compare the two.");
  flags.Bool("load-and-run-displaces", &f.load_and_run_displaces,
             "No cold start: a request whose model would finish sooner loaded onto its best accelerator than on "
             "a ready copy elsewhere is sent there also when the accelerator has no free room, if idle copies "
             "resident there for at least --move-min-residence can make it (they are evicted and answer from CPU "
             "copies). false: it loads only into free room, and displacing is the move policy's alone.");
  flags.Bool("load-on-arrival", &f.load_on_arrival,
             "No cold start: a request sent to load and run is held while its model loads, on a thread of the "
             "device's own, and queued once it is loaded, so no worker waits for the transfer. false: it is queued "
             "at once and the worker that takes it loads the model.");
  flags.Bool("load-and-run-reserves", &f.load_and_run_reserves,
             "No cold start, with --load-on-arrival: a request held while its model loads reserves a thread of "
             "the device for when its load is expected to be done; work that arrives after it starts only where "
             "it leaves that thread free then (it waits otherwise, at most until the load is half its estimate "
             "overdue). false: later work may take the thread, and the request waits for that run.");
  flags.Double("staging-share", &f.staging_share,
               "No cold start: this share of each accelerator's cache budget is left out of the move policy's, so "
               "a request whose model would finish sooner loaded there than on a ready copy elsewhere finds room to "
               "load and run; the copies it loads stay until a later load needs their room (the least asked for "
               "over --staging-demand-window first) or a promotion needs the device's. With background moves "
               "only. 0: the policy's budget is the device's.",
               Must<double>([](double v) { return v >= 0 && v < 1; }, "must be 0 or more and under 1"));
  flags.Duration("staging-demand-window", &f.staging_demand_window,
                 "With a staging share: a load evicts the staged copies whose models were asked for least over "
                 "about this long first (a decaying rate), the least recently used of equals first. 0: the least "
                 "recently used first.",
                 Must<Ms>([](Ms v) { return v.count() == 0 || v.count() >= 100; }, "must be 0 or at least 100ms"));
  flags.Duration("move-window", &f.move_window,
                 "The demand window of the move policy: a model's gain from an accelerator is its requests per "
                 "second x this x the time it saves per request there.",
                 Must<Ms>([](Ms v) { return v.count() >= 100; }, "must be at least 100ms"));
  flags.Double("move-hysteresis", &f.move_hysteresis,
               "A model moves onto an accelerator only when its gain exceeds this many times its move's cost plus "
               "what the models it displaces lose.",
               Must<double>([](double v) { return v >= 1 && v <= 100; }, "must be 1..100"));
  flags.String("move-objective", &f.move_objective,
               "What the move policy keeps low: tail (each request's saved time weighed by its latency, so the "
               "slowest requests keep the accelerator first), tail-set (first the models that must be there for "
               "at most 1% of the requests to pass the lowest threshold the budget allows, then as tail) or mean "
               "(saved time unweighed: a lower mean, a higher tail).");
  flags.Duration("move-min-residence", &f.move_min_residence,
                 "A model that moved onto an accelerator is not displaced for this long.", NotNegative());
  flags.Duration("demand-window", &f.demand_window,
                 "A model's demand (the move policy's requests per second) decays with this time constant.",
                 Must<Ms>([](Ms v) { return v.count() >= 100; }, "must be at least 100ms"));
  flags.Double("demand-change-threshold", &f.demand_change_threshold,
               "Change detection in a model's demand: when the evidence for its rate having doubled or halved "
               "(a log-likelihood sum over its arrivals) passes this, its demand restarts from the rate since the "
               "change began. Lower follows steps sooner and takes more false alarms; 0: off (the decaying rate "
               "alone).",
               Must<double>([](double v) { return v == 0 || (v >= 1 && v <= 100); }, "must be 0 or 1..100"));
  flags.Duration("move-period", &f.move_period,
                 "How often the move policy decides (and at once when a request ran away from its best device).",
                 Must<Ms>([](Ms v) { return v.count() >= 10; }, "must be at least 10ms"));
}

// The other ports and the connections: metrics, REST, gRPC's streams, threads and connection lifetimes.
void AddNetworkFlags(FlagSet& flags, ServerOptions& o, RawFlags& f) {
  flags.String("metrics-address", &o.metrics_address,
               "HOST:PORT for Prometheus to scrape /metrics from; port 0 picks one; empty disables metrics.");
  flags.String("http-address", &o.http_address,
               "HOST:PORT for the Open Inference Protocol's REST API (/v2/...); port 0 picks one; empty disables it.");
  flags.Int("http-threads", &f.http_threads, "Threads serving HTTP connections (REST and JSON work runs on them).",
            InRange(1, 64));
  flags.Duration("http-request-timeout", &o.http_request_timeout,
                 "An HTTP request must arrive whole within this long (keep-alive idle time included), and an answer "
                 "be read within it; slower connections are closed.",
                 Must<Ms>([](Ms v) { return v.count() >= 1; }, "must be positive"));
  flags.Int("http-max-connections", &o.http_max_connections,
            "Open HTTP connections at most; more are answered 503 and closed.", InRange(1, 1000000));
  flags.Int("max-concurrent-streams", &o.max_concurrent_streams,
            "Calls one client connection may have open at once; more wait in the client (HTTP/2 flow control).",
            InRange(1, 100000));
  flags.Bool("grpc-bdp-probe", &o.grpc_bdp_probe,
             "Let gRPC grow each HTTP/2 stream's window to the measured bandwidth-delay product: faster large "
             "messages over long, fast links, but a request that waits for room in --max-inflight-bytes is then "
             "held in the server's memory (by the transport) instead of by its client. Off: windows stay at "
             "64 KiB a stream.");
  flags.Int("grpc-infer-threads", &o.grpc_infer_threads,
            "Threads taking gRPC inference calls (Infer, ModelInfer, ModelStreamInfer) off a completion queue each: "
            "they check, decode and queue each request; device workers answer it.",
            InRange(1, 64));
  flags.String("io-thread-policy", &f.io_thread_policy,
               "Linux CPU policy of every thread but the device workers, the lanes that load models for requests "
               "held on arrival and the placement controller's (gRPC's, the HTTP server's, the inference pollers): "
               "batch (SCHED_BATCH) lets a thread that wakes for network work wait for a free core or the running "
               "thread's turn to end instead of preempting a worker mid-batch; normal (SCHED_OTHER) lets it "
               "preempt. Those others always run normal.");
  flags.Duration("max-connection-age", &o.max_connection_age,
                 "Close client connections after this long (e.g. 5m) so clients reconnect and new replicas get "
                 "traffic; 0 keeps them open.",
                 UnderGrpcsLimit());
  flags.Duration("max-connection-idle", &o.max_connection_idle,
                 "Close gRPC connections that have had no call open for this long (GOAWAY: a client reconnects "
                 "when it next calls), so idle clients do not hold sockets; 0 keeps them open.",
                 UnderGrpcsLimit());
  flags.Duration("grpc-handshake-timeout", &o.grpc_handshake_timeout,
                 "A new gRPC connection must finish its TLS and HTTP/2 set-up within this long, or it is closed: "
                 "sockets opened and left silent are not kept.",
                 HandshakeTimeoutRule());
}

// Who may call what: TLS, tokens, the admin API, reflection.
void AddSecurityFlags(FlagSet& flags, ServerOptions& o, RawFlags& f) {
  flags.String("tls-cert", &o.tls_cert,
               "PEM certificate chain for the gRPC and HTTP ports; enables TLS (with --tls-key).");
  flags.String("tls-key", &o.tls_key, "PEM private key for --tls-cert.");
  flags.String("tls-client-ca", &o.tls_client_ca,
               "PEM CA bundle; clients must present a certificate it signed (mutual TLS).");
  flags.String("auth-token-file", &o.auth_token_file,
               "File of bearer tokens (one per line) required for Infer, ListDevices and ListModels.");
  flags.String("admin-token-file", &o.admin_token_file,
               "File of bearer tokens required for LoadModel and UnloadModel (admin tokens may also infer).");
  flags.Bool("disable-admin", &o.disable_admin, "Refuse LoadModel and UnloadModel entirely.");
  flags.Bool("open-admin-api", &o.open_admin_api,
             "Without --admin-token-file, let anyone who reaches the ports load and unload models (and send model "
             "files, with --max-load-file-bytes). A load can run native code: for a trusted network only. Off: "
             "the admin calls need an admin token.");
  flags.Repeated("http-host-name", &o.http_host_names,
                 "A name the REST port is reached by (besides localhost, IP addresses and the machine's name; "
                 "repeat for more), for admin requests while the admin API is open without a token: one addressed "
                 "to any other Host is refused (DNS rebinding).");
  flags.String("reflection", &f.reflection,
               "gRPC server reflection: on, off, or auto (on unless --auth-token-file or --admin-token-file is "
               "set: reflection answers without a token).");
}

// KServe ModelMesh's model-runtime interface.
void AddModelMeshFlags(FlagSet& flags, ServerOptions& o) {
  flags.String("modelmesh-address", &o.modelmesh_address,
               "HOST:PORT (loopback) or unix:PATH to serve KServe ModelMesh's model-runtime SPI on "
               "(mmesh.ModelRuntime: ModelMesh loads and unloads models here); empty disables it.");
  flags.String("modelmesh-model-root", &o.modelmesh_model_root,
               "Folder every ModelMesh modelPath, and everything in it with links resolved, must lie under (e.g. "
               "/models, where ModelMesh's storage helper puts them). Required with a TCP --modelmesh-address; "
               "on a unix: socket empty allows any folder the server can read.");
  flags.Duration(
      "modelmesh-load-timeout", &o.modelmesh_load_timeout,
      "How long ModelMesh should let one model load take (told to ModelMesh in runtimeStatus).",
      Must<Ms>([](Ms v) { return v.count() >= 1 && v.count() <= UINT32_MAX; }, "must be between 1ms and 49 days"));
  flags.ByteSize("modelmesh-default-model-size", &o.modelmesh_default_model_size,
                 "The size ModelMesh assumes for a model before it is sized (told in runtimeStatus).");
}

// Request tracing (OpenTelemetry); each has an OTEL_ environment variable too.
void AddTracingFlags(FlagSet& flags, TracingFlags& tracing) {
  flags.String("otlp-endpoint", &tracing.otlp_endpoint,
               "Turns request tracing on: where OpenTelemetry spans go over OTLP, e.g. http://collector:4317 (gRPC) "
               "or http://collector:4318 (with --otlp-protocol=http/protobuf). Empty: OTEL_EXPORTER_OTLP_ENDPOINT; "
               "tracing is off when neither is set.");
  flags.String("otlp-protocol", &tracing.otlp_protocol,
               "grpc or http/protobuf (OTEL_EXPORTER_OTLP_PROTOCOL); default grpc.");
  flags.String("trace-sampler", &tracing.sampler,
               "Which calls are traced (OTEL_TRACES_SAMPLER): always_on, always_off, traceidratio, "
               "parentbased_always_on (default), parentbased_always_off or parentbased_traceidratio.");
  flags.String("trace-sampler-arg", &tracing.sampler_arg,
               "The traceidratio samplers' ratio, 0 to 1 (OTEL_TRACES_SAMPLER_ARG), e.g. 0.01 for 1% of calls.");
  flags.String("service-name", &tracing.service_name,
               "service.name of the spans (OTEL_SERVICE_NAME); default infergate.");
  flags.String("resource-attributes", &tracing.resource_attributes,
               "More resource attributes of the spans, key=value,... (added to OTEL_RESOURCE_ATTRIBUTES).");
  flags.Int("trace-queue-size", &tracing.max_queue_size,
            "Finished spans waiting for export at most (OTEL_BSP_MAX_QUEUE_SIZE; default 2048); more are dropped "
            "and counted, so a slow collector never holds a request.");
  flags.Duration("trace-export-delay", &tracing.schedule_delay,
                 "Longest a finished span waits before its batch is exported (OTEL_BSP_SCHEDULE_DELAY; default 5s).");
}

// Which devices are used, and simulated ones for tests and demos.
void AddDeviceFlags(FlagSet& flags, RawFlags& f) {
  flags.String("devices", &f.devices,
               "Allow-list of devices to use, e.g. \"cpu\" (force CPU) or \"cuda:0,mps\"; empty uses all. "
               "The CPU is always kept for fallbacks.");
  flags.String("nvml-library", &f.nvml_library, "NVIDIA management library to read GPU names and memory from.");
  flags.Duration("device-failure-cooldown", &f.device_failure_cooldown,
                 "How long a device that failed stays out of service (its work goes to the CPU).");
  flags.String(
      "simulate-devices", &f.simulate_devices,
      "Simulated devices for tests and demos: mps and cuda:N entries, each optionally =MEMORY "
      "(e.g. 2GiB) and @CAPABILITY (cuda, e.g. 7.5) or @MACOS (mps, e.g. 13), and followed by "
      "bandwidth=12GB/s and transfer_latency=2ms entries: what a load's move of weights onto it costs "
      "(default: a PCIe 4 GPU's for cuda, unified memory's for mps), and a compute_scale=2 entry: each run "
      "held to that many times the least CPU time such a run has taken the host thread (default: the wall time it "
      "takes). They compute on the CPU but enforce the real backend's rules.");
  flags.String("simulate-mps-unsupported-ops", &f.simulate_mps_unsupported_ops,
               "Comma-separated aten ops simulated MPS raises NotImplementedError for; empty uses a default list "
               "of ops real MPS has lacked (aten::upsample_bicubic2d, aten::grid_sampler_3d, ...).");
  flags.String("simulate-failing-devices", &f.simulate_failing_devices,
               "Fault injection: simulated devices (e.g. cuda:0) that fail every run after "
               "--simulate-failures-after runs, like a lost GPU.");
  flags.Int("simulate-failures-after", &f.simulate_failures_after, "Runs a failing simulated device completes first.");
  flags.Double("simulate-cpu-slowdown", &f.simulate_cpu_slowdown,
               "Simulation only: a CPU run takes this many times its own work (the worker waits out the rest), "
               "so simulated accelerators are that much faster than the CPU, as real ones are. The work is the "
               "worker thread's CPU time with one intra-op thread, else the run's wall time. 1: off.",
               Must<double>([](double v) { return v >= 1 && v <= 1000; }, "must be 1..1000"));
}

// The intake's options once each flag met its rule.
absl::Status IntakeFrom(const RawFlags& f, ServerOptions& o) {
  if (o.max_inflight_bytes != 0 && o.max_inflight_bytes < o.max_receive_bytes) {
    return absl::InvalidArgumentError(
        "--max-inflight-bytes: must be at least --max-receive-bytes, or a request of the largest size could never run");
  }
  o.tensor_limits = {static_cast<int>(f.max_tensor_rank), f.max_tensor_elements};
  o.tensor_limits.max_string_elements = f.max_string_elements;
  o.tensor_limits.max_load_file_bytes = o.max_load_file_bytes;
  o.tensor_limits.allow_native_uploads = o.allow_native_uploads;
  o.max_reads_per_address = static_cast<int>(f.max_reads_per_address);
  return absl::OkStatus();
}

// The ports' and threads' options once each flag met its rule.
absl::Status NetworkFrom(const RawFlags& f, ServerOptions& o) {
  o.http_threads = static_cast<int>(f.http_threads);
  absl::StatusOr<CpuPolicy> io_thread_policy = ParseCpuPolicy(f.io_thread_policy.substr(0, 32));
  if (!io_thread_policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--io-thread-policy: ", io_thread_policy.status().message()));
  }
  o.io_thread_policy = *io_thread_policy;
  return absl::OkStatus();
}

absl::Status CheckLogLevel(const ServerOptions& o) {
  if (o.log_level != "debug" && o.log_level != "info" && o.log_level != "warning" && o.log_level != "error") {
    return absl::InvalidArgumentError("--log-level: must be debug, info, warning or error");
  }
  return absl::OkStatus();
}

// TLS's flags together, and reflection's word.
absl::Status SecurityFrom(const RawFlags& f, ServerOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (f.reflection == "auto") {
    o.reflection = ServerOptions::Reflection::kAuto;
  } else if (f.reflection == "on" || f.reflection == "true") {
    o.reflection = ServerOptions::Reflection::kOn;
  } else if (f.reflection == "off" || f.reflection == "false") {
    o.reflection = ServerOptions::Reflection::kOff;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--reflection: '", f.reflection.substr(0, 32), "'; expected on, off or auto"));
  }
  return absl::OkStatus();
}

// ModelMesh's interface loads any folder it is given, without a token: on
// TCP it serves loopback only and reads under a root.
absl::Status CheckModelMesh(const ServerOptions& o) {
  if (o.modelmesh_address.empty() || absl::StartsWith(o.modelmesh_address, "unix:")) return absl::OkStatus();
  if (ListensBeyondLoopback(o.modelmesh_address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--modelmesh-address: '", o.modelmesh_address.substr(0, 64),
                     "' is reachable beyond this host; the SPI loads any folder the server can read, so it serves "
                     "only on loopback (127.0.0.1:PORT, [::1]:PORT) or a unix: socket, where ModelMesh's container "
                     "in the same pod reaches it"));
  }
  if (o.modelmesh_model_root.empty()) {
    return absl::InvalidArgumentError(
        "--modelmesh-model-root: required with a TCP --modelmesh-address: the SPI loads models (and a .pt2 is "
        "native code) for any caller on this host without a token, so it may read only under a root; or serve "
        "it on a unix: socket, whose file permissions are the guard");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv, std::string* help_text) {
  ServerOptions o;
  RawFlags f;
  f.http_threads = o.http_threads;
  TracingFlags tracing;
  FlagSet flags(
      "infergate: gRPC inference server for TorchScript models.\n"
      "Usage: infergate [--address HOST:PORT] [--model-repository DIR] [flags]");
  AddServingFlags(flags, o, f);
  AddIntakeFlags(flags, o, f);
  AddSchedulingFlags(flags, o, f);
  AddNetworkFlags(flags, o, f);
  AddSecurityFlags(flags, o, f);
  AddModelMeshFlags(flags, o);
  AddTracingFlags(flags, tracing);
  AddDeviceFlags(flags, f);
  RETURN_IF_ERROR(flags.ParseEnvironment("INFERGATE_"));
  bool help = false;
  ASSIGN_OR_RETURN(const std::vector<std::string> rest, flags.Parse(argc, argv, &help));
  if (help) {
    *help_text = flags.Help();
    return ServerOptions{};
  }
  if (!rest.empty()) return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", rest.front(), "'"));
  RETURN_IF_ERROR(flags.CheckValues());
  RETURN_IF_ERROR(CheckLogLevel(o));
  RETURN_IF_ERROR(IntakeFrom(f, o));
  RETURN_IF_ERROR(NetworkFrom(f, o));
  RETURN_IF_ERROR(SecurityFrom(f, o));
  RETURN_IF_ERROR(CheckModelMesh(o));
  ASSIGN_OR_RETURN(o.tracing, ResolveTracingOptions(tracing, [](const char* name) { return std::getenv(name); }));
  ASSIGN_OR_RETURN(o.discovery, DiscoveryFrom(f));
  ASSIGN_OR_RETURN(o.scheduler, SchedulerFrom(f));
  using Mode = SchedulerOptions::ModelControl;
  if (!o.modelmesh_address.empty() &&
      (o.scheduler.model_control == Mode::kNone || o.scheduler.model_control == Mode::kPoll)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--modelmesh-address: ModelMesh loads and unloads models, which --model-control-mode=",
        o.scheduler.model_control == Mode::kNone ? "none" : "poll", " refuses; use explicit, or leave the mode unset"));
  }
  return o;
}

bool ListensBeyondLoopback(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (absl::StartsWith(host, "dns:///")) host = host.substr(7);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return !(host == "localhost" || host == "::1" || absl::StartsWith(host, "127."));
}

bool ServesReflection(const ServerOptions& options) {
  switch (options.reflection) {
    case ServerOptions::Reflection::kOn: return true;
    case ServerOptions::Reflection::kOff: return false;
    case ServerOptions::Reflection::kAuto: break;
  }
  return options.auth_token_file.empty() && options.admin_token_file.empty();
}

namespace {

// HOST:PORT of a TorchServe address ("http://0.0.0.0:8085").
absl::StatusOr<std::string> TorchServeHostPort(const std::string& url, absl::string_view key,
                                               const ServerOptions& options) {
  absl::string_view rest = url;
  const bool tls = absl::ConsumePrefix(&rest, "https://");
  if (!tls && !absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.properties: ", key, ": '", url.substr(0, 128), "' is not http://HOST:PORT"));
  }
  if (tls && options.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.properties: ", key, " is https: set --tls-cert and --tls-key"));
  }
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.properties: ", key, ": '", url.substr(0, 128), "' has no port"));
  }
  return std::string(rest);
}

}  // namespace

absl::Status ApplyTorchServeAddresses(const TorchServeAddresses& a, ServerOptions& options) {
  if (!a.inference.empty()) {
    ASSIGN_OR_RETURN(options.http_address, TorchServeHostPort(a.inference, "inference_address", options));
  }
  if (!a.metrics.empty()) {
    ASSIGN_OR_RETURN(std::string metrics, TorchServeHostPort(a.metrics, "metrics_address", options));
    options.metrics_address = metrics;
  }
  if (a.grpc_inference_port > 0) options.address = absl::StrCat("0.0.0.0:", a.grpc_inference_port);
  return absl::OkStatus();
}

}  // namespace infergate
