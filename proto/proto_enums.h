#pragma once
// Conversions between infergate.v1's wire enums and the server's own types,
// shared by the front ends and by model-config parsing.

#include <optional>

#include "devices/dtype.h"
#include "devices/precision.h"
#include "infergate/v1/model_config.pb.h"
#include "infergate/v1/tensor.pb.h"

namespace infergate {

// DataType <-> DType; DATA_TYPE_UNSPECIFIED and unknown numbers give nullopt.
std::optional<DType> DTypeFromProto(int wire);
v1::DataType DTypeToProto(DType dtype);
// Precision <-> infergate.v1.Precision; unknown numbers give nullopt.
std::optional<Precision> PrecisionFromProto(int wire);
v1::Precision PrecisionToProto(Precision precision);

}  // namespace infergate
