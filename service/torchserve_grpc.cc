#include "service/torchserve_grpc.h"

#include "absl/strings/str_cat.h"
#include "service/call_context.h"
#include "service/infer_call.h"
#include "service/message_bytes.h"
#include "service/raw_unary_call.h"
#include "service/torchserve_handlers.h"
#include "service/json_scan.h"

namespace infergate {
namespace {

namespace ts = org::pytorch::serve::grpc::inference;

constexpr InferRpc kPredictions{"org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions",
                                "org.pytorch.serve.grpc.inference.InferenceAPIsService", "Predictions"};

}  // namespace

TorchServeGrpcService::TorchServeGrpcService(InferenceCore& core, const FrontEnd& front_end,
                                             const TorchServeCatalog* catalog)
    : core_(core), front_end_(front_end), models_(core, catalog) {}

grpc::ServerUnaryReactor* TorchServeGrpcService::Ping(grpc::CallbackServerContext*, const grpc::ByteBuffer* in,
                                                      grpc::ByteBuffer* out) {
  auto* call = new RawUnaryCall<google::protobuf::Empty, ts::TorchServeHealthResponse>(*in, out);
  if (!call->parsed()) return call;
  const bool healthy = core_.ready() && !front_end_.draining();
  call->response()->set_health(nlohmann::json({{"status", healthy ? "Healthy" : "Unhealthy"}}).dump(2));
  call->Answer(absl::OkStatus());
  return call;
}

grpc::ServerUnaryReactor* TorchServeGrpcService::Predictions(grpc::CallbackServerContext* ctx,
                                                             const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  // Read here, while the call is decoded; the answer lives in the reactor.
  ts::PredictionsRequest request;
  const absl::Status parse = ParseRequestBytes(*in, &request);
  const std::string model = ModelNameOf(*ctx, request.model_name());
  auto* reactor = new InferCallReactor<ts::PredictionResponse>(front_end_, *ctx, model, kPredictions, out);
  InferCall& call = reactor->call();
  if (!reactor->Admit(*ctx, in->Length())) return reactor;
  if (!parse.ok()) {
    call.Refuse(parse);
    return reactor;
  }
  ts::PredictionResponse* response = reactor->response();
  absl::StatusOr<PredictionTarget> target = models_.Resolve(model, request.model_version());
  if (!target.ok()) {
    call.Refuse(target.status());
    return reactor;
  }
  const char* key = request.input().count("data") ? "data" : "body";
  auto data = request.input().find(key);
  if (data == request.input().end()) {
    call.Refuse(absl::InvalidArgumentError(absl::StrCat(
        "input: needs a \"data\" entry (", MarHandlerName(target->handler),
        target->handler == MarHandler::kBase ? " takes a JSON list)" : " takes a JPEG or PNG)")));
    return reactor;
  }
  const std::string field = absl::StrCat("input[\"", key, "\"]");
  // A JSON parse tree counts against the in-flight budget while it lives.
  absl::StatusOr<InflightBudget::Reservation> tree = call.Reserve(ScanJson(data->second).TreeBytes());
  if (!tree.ok()) {
    call.Refuse(tree.status());
    return reactor;
  }
  absl::StatusOr<at::Tensor> row = [&] {
    HandlerInputTimer timer(front_end_.observer(), target->model);
    return HandlerInputFromBytes(*target, data->second, field, front_end_.limits(), front_end_.budget());
  }();
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
  const MarHandler handler = target->handler;
  call.Submit(std::move(req), [response, batched, handler](InferenceResult& result) {
    response->set_prediction(HandlerOutput(handler, result, batched ? 0 : -1));
    return absl::OkStatus();
  });
  return reactor;
}

}  // namespace infergate
