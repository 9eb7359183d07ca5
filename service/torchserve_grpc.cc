#include "service/torchserve_grpc.h"

#include "absl/strings/str_cat.h"
#include "service/call_context.h"
#include "service/infer_call.h"
#include "service/instance_codec.h"
#include "service/json_scan.h"

namespace infergate {
namespace {

namespace ts = org::pytorch::serve::grpc::inference;

constexpr InferCallReactor::Rpc kPredictions{"org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions",
                                             "org.pytorch.serve.grpc.inference.InferenceAPIsService",
                                             "Predictions"};

}  // namespace

TorchServeGrpcService::TorchServeGrpcService(InferenceCore& core, const FrontEnd& front_end,
                                             const TorchServeCatalog* catalog)
    : core_(core), front_end_(front_end), models_(core, catalog) {}

grpc::ServerUnaryReactor* TorchServeGrpcService::Ping(grpc::CallbackServerContext* ctx, const google::protobuf::Empty*,
                                                      ts::TorchServeHealthResponse* response) {
  const bool healthy = core_.ready() && !front_end_.draining();
  response->set_health(nlohmann::json({{"status", healthy ? "Healthy" : "Unhealthy"}}).dump(2));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TorchServeGrpcService::Predictions(grpc::CallbackServerContext* ctx,
                                                             const ts::PredictionsRequest* request,
                                                             ts::PredictionResponse* response) {
  const std::string model = ModelNameOf(*ctx, request->model_name());
  auto* reactor = new InferCallReactor(front_end_, *ctx, model, kPredictions);
  InferCall& call = reactor->call();
  if (!reactor->Admit(*ctx, request->ByteSizeLong())) return reactor;
  absl::StatusOr<PredictionTarget> target = models_.Resolve(model, request->model_version());
  if (!target.ok()) {
    call.Refuse(target.status());
    return reactor;
  }
  if (target->handler != MarHandler::kBase) {
    call.Refuse(absl::UnimplementedError(
        absl::StrCat("model '", model, "': handler ", MarHandlerName(target->handler), " is not served yet")));
    return reactor;
  }
  const char* key = request->input().count("data") ? "data" : "body";
  auto data = request->input().find(key);
  if (data == request->input().end()) {
    call.Refuse(absl::InvalidArgumentError("input: needs a \"data\" entry (base_handler takes a JSON list)"));
    return reactor;
  }
  const std::string field = absl::StrCat("input[\"", key, "\"]");
  // The parse tree counts against the in-flight budget while it lives.
  absl::StatusOr<InflightBudget::Reservation> tree = call.Reserve(ScanJson(data->second).TreeBytes());
  if (!tree.ok()) {
    call.Refuse(tree.status());
    return reactor;
  }
  absl::StatusOr<nlohmann::json> value = ParseBoundedJson(data->second, field);
  if (!value.ok()) {
    call.Refuse(value.status());
    return reactor;
  }
  absl::StatusOr<at::Tensor> row = InstanceTensor(*value, target->input_dtype, field, front_end_.limits());
  *tree = InflightBudget::Reservation();
  if (!row.ok()) {
    call.Refuse(row.status());
    return reactor;
  }
  absl::StatusOr<at::Tensor> input = target->Input({*std::move(row)}, 0, 1, field);
  if (!input.ok()) {
    call.Refuse(input.status());
    return reactor;
  }
  InferenceRequest req;
  req.model = model;
  req.version = target->version;
  req.deadline = SteadyDeadline(*ctx);
  req.inputs.push_back({"", *std::move(input)});
  const bool batched = target->max_batch_size > 0;
  call.Submit(std::move(req), [response, batched](InferenceResult& result) {
    response->set_prediction(PredictionJson(result.outputs, batched ? 0 : -1).dump());
    return absl::OkStatus();
  });
  return reactor;
}

}  // namespace infergate
