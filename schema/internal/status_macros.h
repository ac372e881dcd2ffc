// Early returns on errors for absl::Status and absl::StatusOr, as Abseil's
// own (not public in Debian 12's Abseil) and most Google code write them.
// Internal to schema/: the converter threads a status through every step.
#ifndef MASKD_SCHEMA_INTERNAL_STATUS_MACROS_H_
#define MASKD_SCHEMA_INTERNAL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status of `expr` (an absl::Status) when it is not OK.
#define MASKD_RETURN_IF_ERROR(expr)                       \
  do {                                                    \
    if (absl::Status maskd_status_ = (expr); !maskd_status_.ok()) \
      return maskd_status_;                               \
  } while (0)

// `lhs = *expr` for `expr` an absl::StatusOr; returns its status when it is
// not OK. `lhs` may declare a variable ("Re r"); it must not hold a comma.
#define MASKD_ASSIGN_OR_RETURN(lhs, expr) \
  MASKD_ASSIGN_OR_RETURN_IMPL_(MASKD_STATUS_CONCAT_(maskd_status_or_, __LINE__), lhs, expr)

#define MASKD_STATUS_CONCAT_INNER_(a, b) a##b
#define MASKD_STATUS_CONCAT_(a, b) MASKD_STATUS_CONCAT_INNER_(a, b)
#define MASKD_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                                 \
  if (!var.ok()) return std::move(var).status();     \
  lhs = *std::move(var)

#endif  // MASKD_SCHEMA_INTERNAL_STATUS_MACROS_H_
