#include "service/torchserve/torchserve_grpc.h"

#include "absl/strings/str_cat.h"
#include "common/caught_exception.h"
#include "service/call/handler_work_pool.h"
#include "service/call/infer_call.h"
#include "service/grpc/call_context.h"
#include "service/grpc/message_bytes.h"
#include "service/grpc/raw_unary_call.h"
#include "service/http/json_scan.h"
#include "service/torchserve/torchserve_handlers.h"

namespace infergate {
namespace {

namespace ts = org::pytorch::serve::grpc::inference;

}  // namespace

const InferRpc kTorchServePredictionsRpc{"org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions",
                                         "org.pytorch.serve.grpc.inference.InferenceAPIsService", "Predictions"};

TorchServeGrpcService::TorchServeGrpcService(InferenceCore& core, const CallEnvironment& environment,
                                             const TorchServeCatalog* catalog)
    : core_(core), environment_(environment), models_(core, catalog) {}

void TorchServeGrpcService::Register(GrpcMethods& methods, GrpcInferCalls& infer_calls) {
  UnaryInferMethod<ts::PredictionsRequest, ts::PredictionResponse> predictions;
  predictions.rpc = &kTorchServePredictionsRpc;
  predictions.model = [](const ts::PredictionsRequest& request) -> const std::string& { return request.model_name(); };
  // The handler takes the request's input bytes (they move, not copy).
  predictions.submit = [this](InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                              ts::PredictionsRequest& request, ts::PredictionResponse* response) {
    SubmitPredictions(call, ctx, model, &request, response);
  };
  predictions.serialize = [](ts::PredictionResponse& response, grpc::ByteBuffer* out) {
    return SerializeAnswerBytes(response, out);
  };
  infer_calls.AddUnary(std::move(predictions));

  // A health check: no token, as over REST.
  AddUnaryMethod(methods, "org.pytorch.serve.grpc.inference.InferenceAPIsService", "Ping", std::nullopt,
                 kSmallRequestBytes, google::protobuf::Empty::descriptor(), this, &TorchServeGrpcService::Ping);
}

void TorchServeGrpcService::Ping(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<google::protobuf::Empty, ts::TorchServeHealthResponse>::Start(server_call);
  if (call == nullptr) return;
  const bool healthy = core_.ready() && !environment_.draining();
  call->response()->set_health(nlohmann::json({{"status", healthy ? "Healthy" : "Unhealthy"}}).dump(2));
  call->Answer(absl::OkStatus());
}

void TorchServeGrpcService::SubmitPredictions(InferCall& call, const grpc::ServerContextBase& ctx,
                                              const std::string& model, ts::PredictionsRequest* request,
                                              ts::PredictionResponse* response) const {
  absl::StatusOr<PredictionTarget> target = models_.Resolve(model, request->model_version());
  if (!target.ok()) return call.Refuse(target.status());
  const char* key = request->input().count("data") ? "data" : "body";
  auto data = request->mutable_input()->find(key);
  if (data == request->mutable_input()->end()) {
    return call.Refuse(absl::InvalidArgumentError(
        absl::StrCat("input: needs a \"data\" entry (", MarHandlerName(target->handler),
                     target->handler == MarHandler::kBase ? " takes a JSON list)" : " takes a JPEG or PNG)")));
  }
  const std::string field = absl::StrCat("input[\"", key, "\"]");
  // The rest reads the request's bytes: they move into the work, which
  // runs on the handler pool for an image (decoding is CPU work of up to a
  // second, not for gRPC's threads), here otherwise.
  auto payload = std::make_shared<std::string>(std::move(data->second));
  const Clock::time_point deadline = SteadyDeadline(ctx);
  const bool image = target->handler == MarHandler::kImageClassifier;
  std::shared_ptr<InferCall> shared = call.shared_from_this();
  auto work = [this, shared, response, payload, target = *std::move(target), field, model, deadline] {
    InferCall& call = *shared;
    // A JSON parse tree counts against the in-flight budget while it lives.
    absl::StatusOr<InflightBudget::Reservation> tree = call.Reserve(ScanJson(*payload).TreeBytes());
    if (!tree.ok()) return call.Refuse(tree.status());
    const HandlerInputLimits limits{environment_.limits(), environment_.budget(),
                                    StopAt(std::min(deadline, Clock::now() + kHandlerInputTimeout), nullptr, field)};
    absl::StatusOr<at::Tensor> row = [&] {
      HandlerInputTimer timer(environment_.observer(), target.model);
      return HandlerInputFromBytes(target, *payload, field, limits);
    }();
    *tree = InflightBudget::Reservation();
    if (!row.ok()) return call.Refuse(row.status());
    absl::StatusOr<at::Tensor> input = target.Input({*std::move(row)}, 0, 1, field);
    if (!input.ok()) return call.Refuse(input.status());
    InferenceRequest req;
    req.model = model;
    req.version = target.version;
    req.deadline = deadline;
    req.inputs.push_back({"", *std::move(input)});
    const bool batched = target.max_batch_size > 0;
    const MarHandler handler = target.handler;
    call.Submit(std::move(req), [response, batched, handler](InferenceResult& result) {
      response->set_prediction(HandlerOutput(handler, result, batched ? 0 : -1));
      return absl::OkStatus();
    });
  };
  HandlerWorkPool* pool = environment_.handler_pool();
  if (!image || pool == nullptr) return work();
  if (!pool->TrySubmit([work = std::move(work), shared]() mutable {
        const absl::Status failed = RunCatching("preparing a prediction", work);
        if (!failed.ok()) shared->Refuse(failed);
      })) {
    call.Refuse(
        absl::ResourceExhaustedError(absl::StrCat("model '", model, "': ", pool->max_queued(),
                                                  " requests already wait to have their images decoded; retry later")));
  }
}

}  // namespace infergate
