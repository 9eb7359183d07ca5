#pragma once
// A ModelInfer answer's bytes with its raw outputs moved, not copied.
//
// Serialising a ModelInferResponse the ordinary way copies every output's
// bytes once more (the answer message holds them, and the serialised
// message holds them again): for a 24 MiB output the call holds 48 MiB
// while gRPC writes it. Here the answer's other fields are serialised into
// a small slice, and each `raw_output_contents` string is handed to gRPC as
// a slice of its own, owned by the slice (freed when gRPC is done with it),
// each after its field's tag and length. Repeated fields may follow the
// others on the wire in any place, so a client parses the same message.
// Outputs under 4 KiB are copied instead (their slices would cost more
// than the copy); an answer of such outputs only is serialised the
// ordinary way, in one slice.
//
// Pure function; thread-compatible (one answer, one thread).

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "inference/grpc_service.pb.h"

namespace infergate {

// Serialises `answer` into `bytes`, moving its raw_output_contents out of
// it (they are empty in `answer` afterwards). INTERNAL, naming its size,
// for an answer over protobuf's 2 GB message limit; `bytes` is then empty.
absl::Status SerializeModelInferAnswer(inference::ModelInferResponse& answer, grpc::ByteBuffer* bytes);

}  // namespace infergate
