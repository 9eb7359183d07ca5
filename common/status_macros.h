#pragma once
// Passing a status on, as TF Serving's and Triton's status macros do:
//
//   RETURN_IF_ERROR(CheckShape(shape));          // returns the error, if any
//   ASSIGN_OR_RETURN(Model model, Load(path));   // or returns Load's error
//
// They only pass a status on unchanged; code that adds to it (a field's
// name, a model's) says so itself.
//
// RETURN_IF_ERROR works in any function returning absl::Status or an
// absl::StatusOr; ASSIGN_OR_RETURN declares (or assigns) `lhs` from a
// StatusOr's value, moved out of a temporary, and must be a statement of
// its own (it expands to several).

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define INFERGATE_STATUS_CONCAT_INNER_(a, b) a##b
#define INFERGATE_STATUS_CONCAT_(a, b) INFERGATE_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                                 \
  do {                                                                        \
    if (::absl::Status infergate_status_ = (expr); !infergate_status_.ok()) { \
      return infergate_status_;                                               \
    }                                                                         \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  INFERGATE_ASSIGN_OR_RETURN_(INFERGATE_STATUS_CONCAT_(infergate_status_or_, __LINE__), lhs, expr)

#define INFERGATE_ASSIGN_OR_RETURN_(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)
