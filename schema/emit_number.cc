// Integers and numbers: bounds (inclusive, exclusive, draft-4 booleans) and
// multipleOf, over the exact range regexes of json_schema_numeric.cc.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

namespace {

struct Bounds {
  std::optional<Decimal> lo, hi;
  bool lo_ex = false, hi_ex = false;
};

absl::StatusOr<Bounds> ReadBounds(const json& s, const std::string& ptr) {
  Bounds b;
  auto tighten_lo = [&](const json& v, bool ex, const char* kw) -> absl::Status {
    if (!v.is_number()) return Invalid(absl::StrCat(kw, " at ", Where(ptr), " is not a number"));
    auto d = DecimalOf(v);
    if (!d) return absl::OkStatus();
    if (!b.lo || CompareDecimal(*d, *b.lo) > 0 || (CompareDecimal(*d, *b.lo) == 0 && ex)) {
      b.lo = d;
      b.lo_ex = ex;
    }
    return absl::OkStatus();
  };
  auto tighten_hi = [&](const json& v, bool ex, const char* kw) -> absl::Status {
    if (!v.is_number()) return Invalid(absl::StrCat(kw, " at ", Where(ptr), " is not a number"));
    auto d = DecimalOf(v);
    if (!d) return absl::OkStatus();
    if (!b.hi || CompareDecimal(*d, *b.hi) < 0 || (CompareDecimal(*d, *b.hi) == 0 && ex)) {
      b.hi = d;
      b.hi_ex = ex;
    }
    return absl::OkStatus();
  };
  if (auto it = s.find("minimum"); it != s.end()) {
    MASKD_RETURN_IF_ERROR(tighten_lo(*it, false, "minimum"));
  }
  if (auto it = s.find("exclusiveMinimum"); it != s.end()) {
    MASKD_RETURN_IF_ERROR(tighten_lo(*it, true, "exclusiveMinimum"));
  }
  if (auto it = s.find("maximum"); it != s.end()) {
    MASKD_RETURN_IF_ERROR(tighten_hi(*it, false, "maximum"));
  }
  if (auto it = s.find("exclusiveMaximum"); it != s.end()) {
    MASKD_RETURN_IF_ERROR(tighten_hi(*it, true, "exclusiveMaximum"));
  }
  return b;
}

// Decimal digit strings (no sign, no leading zeros) plus and minus one.
std::string IncrementDigits(std::string s) {
  int i = static_cast<int>(s.size()) - 1;
  while (i >= 0 && s[i] == '9') s[i--] = '0';
  if (i < 0) return "1" + s;
  ++s[i];
  return s;
}

std::string DecrementDigits(std::string s) {  // s > 0
  int i = static_cast<int>(s.size()) - 1;
  while (i >= 0 && s[i] == '0') s[i--] = '9';
  --s[i];
  size_t k = 0;
  while (k + 1 < s.size() && s[k] == '0') ++k;
  return s.substr(k);
}

BigInt Floor(const Decimal& d) {
  BigInt b{d.neg, d.ip};
  if (!d.fp.empty() && d.neg) b.digits = IncrementDigits(d.ip);
  return b;
}

BigInt Ceil(const Decimal& d) {
  BigInt b{d.neg, d.ip};
  if (!d.fp.empty() && !d.neg) b.digits = IncrementDigits(d.ip);
  if (b.digits == "0") b.neg = false;
  return b;
}

BigInt AddOne(BigInt b, int delta) {  // delta = +1 or -1
  bool zero = b.digits == "0";
  if (zero) return BigInt{delta < 0, "1"};
  if (b.neg == (delta < 0)) {
    b.digits = IncrementDigits(b.digits);
  } else {
    b.digits = DecrementDigits(b.digits);
    if (b.digits == "0") b.neg = false;
  }
  return b;
}

}  // namespace

absl::StatusOr<Re> Converter::ConvertInteger(const json& s, const std::string& ptr) {
  MASKD_ASSIGN_OR_RETURN(Bounds b, ReadBounds(s, ptr));
  std::optional<BigInt> lo, hi;
  if (b.lo) {
    lo = b.lo_ex ? AddOne(Floor(*b.lo), +1) : Ceil(*b.lo);
  }
  if (b.hi) {
    hi = b.hi_ex ? AddOne(Ceil(*b.hi), -1) : Floor(*b.hi);
  }
  Re r;
  if (auto m = s.find("multipleOf"); m != s.end()) {
    MASKD_ASSIGN_OR_RETURN(r, IntegerMultiple(*m, lo, hi, ptr));
  } else {
    r = IntegerRangeRegex(lo, hi);
  }
  if (!r) return r;
  return absl::StrCat("(?:", *r, ")(?:\\.0)?");
}

absl::StatusOr<Re> Converter::IntegerMultiple(const json& mv, const std::optional<BigInt>& lo,
                                              const std::optional<BigInt>& hi, const std::string& ptr) {
  auto m = DecimalOf(mv);
  if (!m || m->neg || (m->ip == "0" && m->fp.empty())) {
    return Invalid(absl::StrCat("multipleOf at ", Where(ptr), " is not a positive number"));
  }
  if (!m->fp.empty()) {
    // Every integer is a multiple of m when 1/m is an integer (m = 1/k).
    double inv = 1.0 / mv.get<double>();
    if (std::fabs(inv - std::round(inv)) < 1e-9) return IntegerRangeRegex(lo, hi);
    return Unsupported("multipleOf", ptr, "a fractional multipleOf on integers");
  }
  if (m->ip == "1") return IntegerRangeRegex(lo, hi);
  // Bounded and small: enumerate.
  if (lo && hi && lo->digits.size() <= 15 && hi->digits.size() <= 15 && m->ip.size() <= 15) {
    long long l = std::stoll(lo->digits) * (lo->neg ? -1 : 1);
    long long h = std::stoll(hi->digits) * (hi->neg ? -1 : 1);
    long long step = std::stoll(m->ip);
    long long first = l >= 0 ? ((l + step - 1) / step) * step : -((-l) / step) * step;
    if (h < first) return Re();
    if ((h - first) / step <= 2000) {
      std::vector<std::string> parts;
      for (long long x = first; x <= h; x += step) parts.push_back(std::to_string(x));
      return UnionRe(parts);
    }
  }
  if (!lo && !hi) {
    const std::string& d = m->ip;
    // 10^k: k trailing zeros.
    if (d[0] == '1' && d.find_first_not_of('0', 1) == std::string::npos) {
      return absl::StrCat("(?:0|-?[1-9][0-9]*0{", d.size() - 1, "})");
    }
    if (d == "2") return std::string("(?:-?[0-9]*[02468])");
    if (d == "5") return std::string("(?:-?[0-9]*[05])");
  }
  if (lo && !lo->neg && !hi) {
    const std::string& d = m->ip;
    if (lo->digits == "0" || lo->digits == "1") {
      if (d[0] == '1' && d.find_first_not_of('0', 1) == std::string::npos)
        return absl::StrCat("(?:", lo->digits == "0" ? "0|" : "", "[1-9][0-9]*0{", d.size() - 1, "})");
      if (d == "2") return absl::StrCat("(?:", lo->digits == "0" ? "0|" : "", "[1-9][0-9]*[02468]|[2468])");
      if (d == "5") return absl::StrCat("(?:", lo->digits == "0" ? "0|" : "", "[1-9][0-9]*[05]|5)");
    }
  }
  return Unsupported("multipleOf", ptr, absl::StrCat("multipleOf ", m->ip, " with these bounds"));
}

absl::StatusOr<Re> Converter::ConvertNumber(const json& s, const std::string& ptr) {
  MASKD_ASSIGN_OR_RETURN(Bounds b, ReadBounds(s, ptr));
  if (auto mv = s.find("multipleOf"); mv != s.end()) {
    auto m = DecimalOf(*mv);
    if (!m || m->neg || (m->ip == "0" && m->fp.empty())) {
      return Invalid(absl::StrCat("multipleOf at ", Where(ptr), " is not a positive number"));
    }
    if (m->fp.empty()) {
      // Integer multiples: the integer regex (with an optional ".0").
      json t = s;
      t.erase("type");
      return ConvertInteger(t, ptr);
    }
    // 10^-k: at most k fraction digits (then zeros).
    bool pow10 = m->ip == "0" && m->fp.back() == '1' &&
                 m->fp.find_first_not_of('0') == m->fp.size() - 1;
    if (pow10 && !b.lo && !b.hi) {
      return absl::StrCat("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]{1,", m->fp.size(), "}0*)?");
    }
    if (pow10 && b.lo && b.hi) {
      // Enumerate the grid when small: integer part range x fraction digits.
      Warn("multipleOf", ptr, "fraction digits not enforced together with bounds");
    } else {
      return Unsupported("multipleOf", ptr, absl::StrCat("multipleOf ", NumberText(*mv)));
    }
  }
  return NumberRangeRegex(b.lo, b.lo_ex, b.hi, b.hi_ex);
}

}  // namespace maskd::json_schema_internal
