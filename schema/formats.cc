// String formats (`format`) as regexes over JSON string content.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace maskd::json_schema_internal {

std::string FormatRegex(const std::string& f) {
  static const std::string kDate =
      "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
      "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";
  static const std::string kTime =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  static const std::string kIpv4 = absl::StrCat(kOctet, "(?:\\.", kOctet, "){3}");
  static const std::string kH16 = "[0-9a-fA-F]{1,4}";
  static const std::string kLs32 = absl::StrCat("(?:", kH16, ":", kH16, "|", kIpv4, ")");
  static const std::string kIpv6 = absl::StrCat(
      "(?:(?:", kH16, ":){6}", kLs32,
      "|::(?:", kH16, ":){5}", kLs32,
      "|(?:", kH16, ")?::(?:", kH16, ":){4}", kLs32,
      "|(?:(?:", kH16, ":){0,1}", kH16, ")?::(?:", kH16, ":){3}", kLs32,
      "|(?:(?:", kH16, ":){0,2}", kH16, ")?::(?:", kH16, ":){2}", kLs32,
      "|(?:(?:", kH16, ":){0,3}", kH16, ")?::", kH16, ":", kLs32,
      "|(?:(?:", kH16, ":){0,4}", kH16, ")?::", kLs32,
      "|(?:(?:", kH16, ":){0,5}", kH16, ")?::", kH16,
      "|(?:(?:", kH16, ":){0,6}", kH16, ")?::)");
  static const std::string kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
  static const std::string kHostname = absl::StrCat(kLabel, "(?:\\.", kLabel, ")*");
  // URI characters (RFC 3986 unreserved, reserved and %-escapes); "/" may
  // be escaped in JSON.
  static const std::string kUriChar = "(?:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=]|%[0-9a-fA-F]{2}|\\\\/)";
  if (f == "date") return kDate;
  if (f == "time") return kTime;
  if (f == "date-time") return absl::StrCat(kDate, "[Tt]", kTime);
  if (f == "duration") {
    return "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
           "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
           "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)";
  }
  if (f == "uuid") {
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  }
  if (f == "ipv4") return kIpv4;
  if (f == "ipv6") return kIpv6;
  if (f == "hostname") return kHostname;
  if (f == "email") {
    return absl::StrCat("[A-Za-z0-9!#$%&'*+=?^_`{|}~\\-]+(?:\\.[A-Za-z0-9!#$%&'*+=?^_`{|}~\\-]+)*@(?:",
                        kHostname, "|\\[", kIpv4, "\\])");
  }
  if (f == "uri") return absl::StrCat("[A-Za-z][A-Za-z0-9+\\-.]*:", kUriChar, "*");
  if (f == "uri-reference") return absl::StrCat(kUriChar, "*");
  return "";
}

}  // namespace maskd::json_schema_internal
