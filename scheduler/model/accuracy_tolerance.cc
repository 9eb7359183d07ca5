#include "scheduler/model/accuracy_tolerance.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace infergate {

Tolerance DefaultTolerance(DType dtype) {
  // Unit roundoff: FP16 2^-11 (4.9e-4), BF16 2^-8 (3.9e-3). About 20 units
  // (FP16) and 13 units (BF16) relative to the output's scale leave room for
  // the error a few layers of sums accumulate; overflow (inf/NaN) or a
  // wrong kernel (errors of the output's own size) are far beyond.
  switch (dtype) {
    case DType::kFloat16: return {1e-3, 1e-2};
    case DType::kBFloat16: return {1e-2, 5e-2};
    default: return {0, 0};
  }
}

Tolerance ToleranceFor(const v1::AccuracyConfig& config, DType dtype, absl::string_view output) {
  Tolerance t = DefaultTolerance(dtype);
  if (config.max_abs_error() > 0) t.max_abs_error = config.max_abs_error();
  if (config.max_rel_error() > 0) t.max_rel_error = config.max_rel_error();
  for (const v1::OutputTolerance& o : config.outputs()) {
    if (o.name() != output) continue;
    if (o.max_abs_error() > 0) t.max_abs_error = o.max_abs_error();
    if (o.max_rel_error() > 0) t.max_rel_error = o.max_rel_error();
  }
  return t;
}

namespace {

// How far beyond its bound an output is: > 1 fails. Infinite for a problem
// or new NaN/inf.
double Excess(const OutputError& e, const Tolerance& t) {
  if (e.new_non_finite || std::isnan(e.max_abs_error)) return std::numeric_limits<double>::infinity();
  double allowed = t.Allowed(e.reference_magnitude);
  if (allowed <= 0) return e.max_abs_error > 0 ? std::numeric_limits<double>::infinity() : 0;
  return e.max_abs_error / allowed;
}

double WorstExcess(const AccuracyMeasurement& m, const v1::AccuracyConfig& config, DType dtype) {
  if (!m.problem.empty()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (const OutputError& e : m.outputs) worst = std::max(worst, Excess(e, ToleranceFor(config, dtype, e.output)));
  return worst;
}

}  // namespace

AccuracyVerdict Judge(const AccuracyMeasurement& measurement, const v1::AccuracyConfig& config, DType dtype) {
  AccuracyVerdict v;
  if (!measurement.problem.empty()) {
    v.problem = measurement.problem;
    return v;
  }
  if (measurement.outputs.empty()) {
    v.problem = "the model returned no outputs to compare";
    return v;
  }
  double worst = -1;
  for (const OutputError& e : measurement.outputs) {
    const Tolerance t = ToleranceFor(config, dtype, e.output);
    double excess = Excess(e, t);
    if (excess <= worst) continue;
    worst = excess;
    v.worst_output = e.output;
    v.error = e.max_abs_error;
    v.allowed = t.Allowed(e.reference_magnitude);
    v.relative_error = e.reference_magnitude > 0 ? e.max_abs_error / e.reference_magnitude : e.max_abs_error;
    v.new_non_finite = e.new_non_finite;
  }
  v.passed = worst <= 1.0;
  return v;
}

std::string AccuracyVerdict::Describe() const {
  if (!problem.empty()) return problem;
  if (new_non_finite) return absl::StrCat("NaN or inf in output '", worst_output, "' where FP32 has none");
  return absl::StrFormat("error %.3g on output '%s' (relative %.3g, allowed %.3g)", error, worst_output, relative_error,
                         allowed);
}

const AccuracyMeasurement& Worse(const AccuracyMeasurement& a, const AccuracyMeasurement& b,
                                 const v1::AccuracyConfig& config, DType dtype) {
  return WorstExcess(b, config, dtype) > WorstExcess(a, config, dtype) ? b : a;
}

}  // namespace infergate
