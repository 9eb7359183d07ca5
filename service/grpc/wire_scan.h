#pragma once
// What parsing a protobuf message will cost, read from its wire bytes
// before anything is parsed.
//
// A protobuf message's parsed form can be far larger than its bytes: an
// empty length-delimited field is 2 bytes on the wire and a heap object
// of 30-100 bytes once parsed (a repeated message's element, a string, an
// unknown field kept for re-serialisation), so 20 MB of them become about
// 2 GB. The front ends therefore scan a request before parsing it: every
// field is walked by its tag and length (nothing is copied or decoded),
// counted against limits, and priced at what protobuf's parser will
// allocate for it. The caller charges that price to the in-flight budget,
// or refuses the message, before the parser runs.
//
// The price is an upper estimate measured against protobuf 3.21's own
// accounting (tests/service/grpc/wire_scan_test.cc): per message object its
// size (the type's default instance) and the allocator's overhead; per
// repeated element its slot, doubled for the growth of the container; per
// string its object and, past the small-string buffer, its bytes; per
// unknown field its record and its bytes. Packed fixed-width numbers are
// their own bytes (the parser reserves them exactly).
//
// Threading: pure functions; the per-type size cache is behind a lock.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/descriptor.h"

namespace infergate {

struct WireScanLimits {
  // Elements one repeated message field (a map's entries too) may hold,
  // at any depth: a request's tensors, shapes' lengths, parameters.
  int64_t max_repeated_messages = 1 << 16;
  // Elements of repeated string and bytes fields, in the whole message:
  // each is a heap object once parsed, whatever its length.
  int64_t max_string_elements = int64_t{1} << 22;
  // Fields the message's type does not define, in all (kept by the parser
  // to be written back).
  int64_t max_unknown_fields = 1024;
  // Nesting of messages and groups.
  int max_depth = 32;
};

struct WireCost {
  // What the parsed message will hold, at most (an estimate: see above).
  uint64_t parsed_bytes = 0;
  // Elements of repeated string and bytes fields.
  int64_t string_elements = 0;
  // Fields the type does not define.
  int64_t unknown_fields = 0;
};

// Scans the bytes of a `type` message, given as consecutive chunks (a
// gRPC message's slices). INVALID_ARGUMENT naming the field path
// ("inputs[3].shape") when a limit is passed, and "request: not a valid
// <type> message" when the bytes are not a well-formed message (a
// truncated field, a bad tag): the parser would refuse those too.
absl::StatusOr<WireCost> ScanWire(const google::protobuf::Descriptor& type, absl::Span<const absl::string_view> chunks,
                                  const WireScanLimits& limits);

// The same over one contiguous buffer.
absl::StatusOr<WireCost> ScanWire(const google::protobuf::Descriptor& type, absl::string_view bytes,
                                  const WireScanLimits& limits);

}  // namespace infergate
