#pragma once
// The accuracy contract's arithmetic: how far a reduced-precision run of a
// model may be from FP32 on the CPU, and the verdict on a measurement. Pure
// functions of the config and the figures; the measuring (which needs
// LibTorch) is in output_comparison.h.
//
// An output passes when its largest absolute difference from the reference
// is at most max_abs_error + max_rel_error * (the reference's largest
// magnitude), and it has no NaN or inf where the reference had none.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "infergate/v1/model_config.pb.h"

namespace infergate {

struct Tolerance {
  double max_abs_error = 0;
  double max_rel_error = 0;
  // What an output whose reference reaches `magnitude` may be off by.
  double Allowed(double magnitude) const { return max_abs_error + max_rel_error * magnitude; }
};

// The default for a reduced dtype (FP16, BF16): a few dozen units of its
// rounding error, which a sound model's layers accumulate, and far below
// what overflow or a broken kernel does. Zero for any other dtype.
Tolerance DefaultTolerance(DType dtype);

// The tolerance `config` sets for `output` in `dtype`: the per-output entry,
// else the model's, else the default, field by field (0 means unset).
Tolerance ToleranceFor(const v1::AccuracyConfig& config, DType dtype, absl::string_view output);

// How one output of a candidate run differs from the reference.
struct OutputError {
  std::string output;
  double max_abs_error = 0;        // largest |candidate - reference|
  double reference_magnitude = 0;  // largest |reference|
  bool new_non_finite = false;     // NaN or inf where the reference had none
  friend bool operator==(const OutputError&, const OutputError&) = default;
};

// A whole check: every output's error, or why the outputs could not be
// compared (the candidate failed to run, returned other outputs or shapes).
struct AccuracyMeasurement {
  std::vector<OutputError> outputs;
  std::string problem;  // empty when the outputs were compared
  friend bool operator==(const AccuracyMeasurement&, const AccuracyMeasurement&) = default;
};

struct AccuracyVerdict {
  bool passed = false;
  std::string worst_output;   // the output furthest beyond (or nearest to) its bound
  double error = 0;           // its largest absolute error
  double allowed = 0;         // what its tolerance allowed
  double relative_error = 0;  // error / the reference's largest magnitude (error itself when that is 0)
  // "error 0.603 on output 'y' (largest |FP32| 0.69, allowed 0.0445)", or
  // the problem, or the NaN/inf finding.
  std::string Describe() const;
  std::string problem;
  bool new_non_finite = false;
};

AccuracyVerdict Judge(const AccuracyMeasurement& measurement, const v1::AccuracyConfig& config, DType dtype);

// Of two measurements of the same combination, the one `Judge` finds worse
// (a failing one before a passing one, then the larger error relative to
// its bound): what a running check keeps.
const AccuracyMeasurement& Worse(const AccuracyMeasurement& a, const AccuracyMeasurement& b,
                                 const v1::AccuracyConfig& config, DType dtype);

}  // namespace infergate
