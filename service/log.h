// Log: one line per event on stderr, "<UTC time> maskd <LEVEL> <message>".
// maskd logs its start, its stop and error-level events only; messages never
// carry the contents of a constraint.
#ifndef MASKD_SERVICE_LOG_H_
#define MASKD_SERVICE_LOG_H_

#include "absl/strings/string_view.h"

namespace maskd {

void LogInfo(absl::string_view message);
void LogError(absl::string_view message);

}  // namespace maskd

#endif  // MASKD_SERVICE_LOG_H_
