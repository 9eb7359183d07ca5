#include "service/grpc/raw_unary_call.h"

#include "service/grpc/status_convert.h"

namespace infergate {

void RawUnaryReactor::Answer(const absl::Status& status) {
  if (!status.ok()) return Finish(ToGrpcStatus(status));
  if (absl::Status serialized = SerializeAnswerBytes(response_, out_); !serialized.ok()) {
    return Finish(ToGrpcStatus(serialized));
  }
  Finish(grpc::Status::OK);
}

}  // namespace infergate
