// Numbers for the JSON Schema converter: exact integer and decimal range
// regexes over digit strings of any length, Python float formatting, JSON
// string escaping and regex literal escaping.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schema/internal/json_schema_internal.h"

namespace maskd::json_schema_internal {
namespace {

using Re = std::optional<std::string>;

bool AllChar(std::string_view s, char c) {
  for (char x : s)
    if (x != c) return false;
  return true;
}

// Digits compared as non-negative integers (no leading zeros).
int CmpDigits(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

std::string StripLeadingZeros(std::string s) {
  size_t i = 0;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  return s.substr(i);
}

std::string IncDigits(std::string s) {
  int i = static_cast<int>(s.size()) - 1;
  while (i >= 0 && s[i] == '9') s[i--] = '0';
  if (i < 0) return "1" + s;
  ++s[i];
  return s;
}

// s > 0.
std::string DecDigits(std::string s) {
  int i = static_cast<int>(s.size()) - 1;
  while (i >= 0 && s[i] == '0') s[i--] = '9';
  --s[i];
  return StripLeadingZeros(s);
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return std::string(1, lo);
  if (lo == '0' && hi == '9') return "[0-9]";
  return absl::StrCat("[", std::string(1, lo), hi == lo + 1 ? "" : "-", std::string(1, hi), "]");
}

std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return absl::StrCat("[0-9]{", n, "}");
}

std::string Alt(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  return absl::StrCat("(?:", absl::StrJoin(parts, "|"), ")");
}

// Digit strings x of a.size() digits with a <= x <= b (lexicographic).
std::string SameLen(std::string_view a, std::string_view b) {
  size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return std::string(a);
  if (a[0] == b[0]) return absl::StrCat(std::string(1, a[0]), SameLen(a.substr(1), b.substr(1)));
  std::vector<std::string> parts;
  char lo = a[0], hi = b[0];
  if (!AllChar(a.substr(1), '0')) {
    parts.push_back(absl::StrCat(std::string(1, a[0]),
                                 SameLen(a.substr(1), std::string(n - 1, '9'))));
    ++lo;
  }
  std::string high;
  if (!AllChar(b.substr(1), '9')) {
    high = absl::StrCat(std::string(1, b[0]), SameLen(std::string(n - 1, '0'), b.substr(1)));
    --hi;
  }
  if (lo <= hi) parts.push_back(DigitClass(lo, hi) + AnyDigits(n - 1));
  if (!high.empty()) parts.push_back(high);
  return Alt(parts);
}

// Non-negative integers in [lo, hi] (hi absent: unbounded); lo <= hi.
std::string NonNegIntRange(const std::string& lo, const std::optional<std::string>& hi) {
  std::vector<std::string> parts;
  size_t max_len = hi ? hi->size() : lo.size();
  for (size_t len = lo.size(); len <= max_len; ++len) {
    std::string a = len == lo.size() ? lo : (len == 1 ? "0" : "1" + std::string(len - 1, '0'));
    std::string b = (hi && len == hi->size()) ? *hi : std::string(len, '9');
    parts.push_back(SameLen(a, b));
  }
  if (!hi) parts.push_back(absl::StrCat("[1-9][0-9]{", lo.size(), ",}"));
  return Alt(parts);
}

// --- fractions: regexes over the digits after the '.', at least one digit,
// comparing 0.d with 0.s (s without trailing zeros).
Re Concat(const std::string& a, const Re& b) {
  if (!b) return std::nullopt;
  return a + *b;
}
Re Opt(const Re& r) {
  if (!r) return std::string();
  if (r->empty()) return std::string();
  return absl::StrCat("(?:", *r, ")?");
}
Re AltRe(std::vector<Re> parts) {
  std::vector<std::string> live;
  for (auto& p : parts)
    if (p) live.push_back(*p);
  if (live.empty()) return std::nullopt;
  return Alt(live);
}

Re Tail(const Re& f, bool zero_ok) { return zero_ok ? Opt(f) : f; }

Re FracGE(std::string_view s) {  // 0.d >= 0.s
  if (s.empty()) return std::string("[0-9]+");
  char c = s[0];
  std::string_view r = s.substr(1);
  std::vector<Re> parts;
  if (c < '9') parts.push_back(DigitClass(c + 1, '9') + "[0-9]*");
  parts.push_back(Concat(std::string(1, c), Tail(FracGE(r), r.empty())));
  return AltRe(parts);
}
Re FracGT(std::string_view s) {  // 0.d > 0.s
  if (s.empty()) return std::string("0*[1-9][0-9]*");
  char c = s[0];
  std::vector<Re> parts;
  if (c < '9') parts.push_back(DigitClass(c + 1, '9') + "[0-9]*");
  parts.push_back(Concat(std::string(1, c), FracGT(s.substr(1))));
  return AltRe(parts);
}
Re FracLE(std::string_view s) {  // 0.d <= 0.s
  if (s.empty()) return std::string("0+");
  char c = s[0];
  std::vector<Re> parts;
  if (c > '0') parts.push_back(DigitClass('0', c - 1) + "[0-9]*");
  parts.push_back(Concat(std::string(1, c), Tail(FracLE(s.substr(1)), true)));
  return AltRe(parts);
}
Re FracLT(std::string_view s) {  // 0.d < 0.s
  if (s.empty()) return std::nullopt;
  char c = s[0];
  std::string_view r = s.substr(1);
  std::vector<Re> parts;
  if (c > '0') parts.push_back(DigitClass('0', c - 1) + "[0-9]*");
  parts.push_back(Concat(std::string(1, c), Tail(FracLT(r), !r.empty())));
  return AltRe(parts);
}

// Whether the fraction digits "" (value 0) satisfy the bounds.
bool ZeroFracOkLower(std::string_view s, bool strict) { return s.empty() && !strict; }
bool ZeroFracOkUpper(std::string_view s, bool strict) { return !(s.empty() && strict); }
Re FracLower(std::string_view s, bool strict) { return strict ? FracGT(s) : FracGE(s); }
Re FracUpper(std::string_view s, bool strict) { return strict ? FracLT(s) : FracLE(s); }

// Digit strings d (length >= 1) with lo <= 0.d <= hi (strictness per side).
Re FracBetween(std::string_view lo, bool lo_strict, std::string_view hi, bool hi_strict) {
  if (lo.empty() && !lo_strict) return FracUpper(hi, hi_strict);
  if (hi.empty()) return std::nullopt;
  char lc = lo.empty() ? '0' : lo[0];
  char hc = hi[0];
  std::string_view lr = lo.empty() ? lo : lo.substr(1);
  std::string_view hr = hi.substr(1);
  if (lc == hc) {
    bool zero_ok = ZeroFracOkLower(lr, lo_strict) && ZeroFracOkUpper(hr, hi_strict);
    return Concat(std::string(1, lc), Tail(FracBetween(lr, lo_strict, hr, hi_strict), zero_ok));
  }
  std::vector<Re> parts;
  parts.push_back(
      Concat(std::string(1, lc), Tail(FracLower(lr, lo_strict), ZeroFracOkLower(lr, lo_strict))));
  if (lc + 1 <= hc - 1) parts.push_back(DigitClass(lc + 1, hc - 1) + "[0-9]*");
  parts.push_back(
      Concat(std::string(1, hc), Tail(FracUpper(hr, hi_strict), ZeroFracOkUpper(hr, hi_strict))));
  return AltRe(parts);
}

// Builds "<int>" + fraction part given the fraction regex and whether a
// missing fraction (value exactly <int>) is allowed.
Re WithFraction(const std::string& int_re, Re frac, bool zero_ok) {
  if (frac && frac->empty()) frac = std::nullopt;
  if (!frac) {
    if (!zero_ok) return std::nullopt;
    return int_re;
  }
  if (zero_ok) return absl::StrCat(int_re, "(?:\\.", *frac, ")?");
  return absl::StrCat(int_re, "\\.", *frac);
}

// Non-negative decimals ("0", "12", "3.25"; no exponent) in [lo, hi].
Re NonNegDecimalRange(const Decimal& lo, bool lo_strict, const std::optional<Decimal>& hi,
                      bool hi_strict) {
  if (hi) {
    int c = CompareDecimal(lo, *hi);
    if (c > 0 || (c == 0 && (lo_strict || hi_strict))) return std::nullopt;
  }
  if (hi && lo.ip == hi->ip) {
    Re frac = FracBetween(lo.fp, lo_strict, hi->fp, hi_strict);
    bool zero_ok = ZeroFracOkLower(lo.fp, lo_strict) && ZeroFracOkUpper(hi->fp, hi_strict);
    return WithFraction(lo.ip, frac, zero_ok);
  }
  std::vector<Re> parts;
  // Integer part == lo.ip.
  parts.push_back(WithFraction(lo.ip, FracLower(lo.fp, lo_strict),
                               ZeroFracOkLower(lo.fp, lo_strict)));
  // Integer part strictly between.
  std::string mid_lo = IncDigits(lo.ip);
  std::optional<std::string> mid_hi;
  bool mid_ok = true;
  if (hi) {
    if (hi->ip == "0") {
      mid_ok = false;
    } else {
      mid_hi = DecDigits(hi->ip);
      mid_ok = CmpDigits(mid_lo, *mid_hi) <= 0;
    }
  }
  if (mid_ok) parts.push_back(NonNegIntRange(mid_lo, mid_hi) + "(?:\\.[0-9]+)?");
  // Integer part == hi.ip.
  if (hi) {
    parts.push_back(WithFraction(hi->ip, FracUpper(hi->fp, hi_strict),
                                 ZeroFracOkUpper(hi->fp, hi_strict)));
  }
  return AltRe(parts);
}

Decimal Negate(Decimal d) {
  if (d.ip != "0" || !d.fp.empty()) d.neg = !d.neg;
  return d;
}

const Decimal kZero{};

}  // namespace

std::optional<Decimal> ParseDecimal(std::string_view t) {
  Decimal d;
  size_t i = 0;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) d.neg = t[i++] == '-';
  std::string digits;
  long point = -1;
  bool any = false;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c >= '0' && c <= '9') {
      digits.push_back(c);
      any = true;
    } else if (c == '.' && point < 0) {
      point = static_cast<long>(digits.size());
    } else {
      break;
    }
  }
  if (!any) return std::nullopt;
  if (point < 0) point = static_cast<long>(digits.size());
  long exp = 0;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) eneg = t[i++] == '-';
    bool eany = false;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
      if (exp < 100000) exp = exp * 10 + (t[i] - '0');
      eany = true;
    }
    if (!eany) return std::nullopt;
    if (eneg) exp = -exp;
  }
  if (i != t.size()) return std::nullopt;
  if (exp > 5000 || exp < -5000) return std::nullopt;
  point += exp;
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<long>(digits.size())) digits.append(point - digits.size(), '0');
  d.ip = StripLeadingZeros(point == 0 ? "0" : digits.substr(0, point));
  d.fp = digits.substr(point);
  while (!d.fp.empty() && d.fp.back() == '0') d.fp.pop_back();
  if (d.ip == "0" && d.fp.empty()) d.neg = false;
  return d;
}

int CompareDecimal(const Decimal& a, const Decimal& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  int c = CmpDigits(a.ip, b.ip);
  if (c == 0) {
    size_t n = std::max(a.fp.size(), b.fp.size());
    std::string fa = a.fp + std::string(n - a.fp.size(), '0');
    std::string fb = b.fp + std::string(n - b.fp.size(), '0');
    c = fa.compare(fb);
    c = c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return a.neg ? -c : c;
}

std::optional<std::string> IntegerRangeRegex(const std::optional<BigInt>& lo,
                                             const std::optional<BigInt>& hi) {
  // Empty range?
  auto cmp = [](const BigInt& a, const BigInt& b) {
    bool an = a.neg && a.digits != "0", bn = b.neg && b.digits != "0";
    if (an != bn) return an ? -1 : 1;
    int c = CmpDigits(a.digits, b.digits);
    return an ? -c : c;
  };
  if (lo && hi && cmp(*lo, *hi) > 0) return std::nullopt;
  std::vector<std::string> parts;
  // Negative part: x <= -1, y = -x in [max(1, -hi), -lo].
  bool lo_neg = !lo || (lo->neg && lo->digits != "0");
  if (lo_neg) {
    std::string ylo = (hi && hi->neg && hi->digits != "0") ? hi->digits : "1";
    bool ok = true;
    std::optional<std::string> yhi;
    if (lo) yhi = lo->digits;
    if (yhi && CmpDigits(ylo, *yhi) > 0) ok = false;
    if (ok) parts.push_back("-" + NonNegIntRange(ylo, yhi));
  }
  // Non-negative part: x in [max(0, lo), hi].
  bool hi_nonneg = !hi || !(hi->neg && hi->digits != "0");
  if (hi_nonneg) {
    std::string xlo = (lo && !(lo->neg && lo->digits != "0")) ? lo->digits : "0";
    std::optional<std::string> xhi;
    if (hi) xhi = hi->digits;
    if (!xhi || CmpDigits(xlo, *xhi) <= 0) {
      if (xlo == "0" && !xhi) {
        parts.push_back("(?:0|[1-9][0-9]*)");
      } else {
        parts.push_back(NonNegIntRange(xlo, xhi));
      }
    }
  }
  if (parts.empty()) return std::nullopt;
  if (parts.size() == 1) return parts[0];
  // "-" + unbounded and "(?:0|...)" combine into the usual form.
  if (!lo && !hi) return std::string("-?(?:0|[1-9][0-9]*)");
  return Alt(parts);
}

std::optional<std::string> IntegerRangeRegex64(std::optional<int64_t> lo,
                                               std::optional<int64_t> hi) {
  auto conv = [](int64_t v) {
    BigInt b;
    b.neg = v < 0;
    uint64_t mag = v < 0 ? (~static_cast<uint64_t>(v) + 1) : static_cast<uint64_t>(v);
    b.digits = std::to_string(mag);
    return b;
  };
  std::optional<BigInt> l, h;
  if (lo) l = conv(*lo);
  if (hi) h = conv(*hi);
  return IntegerRangeRegex(l, h);
}

std::optional<std::string> NumberRangeRegex(const std::optional<Decimal>& lo, bool lo_exclusive,
                                            const std::optional<Decimal>& hi,
                                            bool hi_exclusive) {
  static const std::string kMantissa = "(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?";
  static const std::string kExp = "[eE][+-]?[0-9]+";
  if (!lo && !hi) return absl::StrCat("-?", kMantissa, "(?:", kExp, ")?");
  if (lo && hi) {
    int c = CompareDecimal(*lo, *hi);
    if (c > 0 || (c == 0 && (lo_exclusive || hi_exclusive))) return std::nullopt;
  }
  std::vector<Re> parts;
  // Negative part: x < 0, y = -x > 0 with y in [-hi, -lo].
  bool has_neg = !lo || lo->neg;
  if (has_neg) {
    Decimal ylo = kZero;
    bool ylo_strict = true;
    if (hi && hi->neg) {
      ylo = Negate(*hi);
      ylo_strict = hi_exclusive;
    }
    std::optional<Decimal> yhi;
    bool yhi_strict = false;
    if (lo) {
      yhi = Negate(*lo);
      yhi_strict = lo_exclusive;
    }
    Re y = NonNegDecimalRange(ylo, ylo_strict, yhi, yhi_strict);
    if (y) parts.push_back("-" + *y);
  }
  // Non-negative part: x >= 0.
  bool has_nonneg = !hi || !hi->neg;
  if (has_nonneg) {
    Decimal xlo = kZero;
    bool xlo_strict = false;
    if (lo && !lo->neg) {
      xlo = *lo;
      xlo_strict = lo_exclusive;
    }
    parts.push_back(NonNegDecimalRange(xlo, xlo_strict, hi, hi_exclusive));
  }
  // Exponent forms where a whole half-line is in range.
  bool lo_le0 = !lo || lo->neg || (CompareDecimal(*lo, kZero) == 0 && !lo_exclusive);
  bool hi_ge0 = !hi || (!hi->neg && !(CompareDecimal(*hi, kZero) == 0 && hi_exclusive));
  static const std::string kNonZeroMantissa =
      "(?:[1-9][0-9]*(?:\\.[0-9]+)?|0\\.[0-9]*[1-9][0-9]*)";
  bool lo_is_0_ex = lo && CompareDecimal(*lo, kZero) == 0 && lo_exclusive;
  bool hi_is_0_ex = hi && CompareDecimal(*hi, kZero) == 0 && hi_exclusive;
  if (!hi && lo_le0) parts.push_back(absl::StrCat(kMantissa, kExp));
  if (!hi && lo_is_0_ex) parts.push_back(absl::StrCat(kNonZeroMantissa, kExp));
  if (!lo && hi_ge0) parts.push_back(absl::StrCat("-", kMantissa, kExp));
  if (!lo && hi_is_0_ex) parts.push_back(absl::StrCat("-", kNonZeroMantissa, kExp));
  return AltRe(parts);
}

std::string PythonFloatRepr(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  bool neg = false;
  if (s[0] == '-') {
    neg = true;
    s = s.substr(1);
  }
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      if (ip.size() < static_cast<size_t>(exp + 1)) ip.append(exp + 1 - ip.size(), '0');
      std::string fp = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "";
      out = ip + "." + (fp.empty() ? "0" : fp);
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string PythonJsonString(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  size_t i = 0;
  auto hex4 = [&](uint32_t v) {
    char b[8];
    std::snprintf(b, sizeof(b), "\\u%04x", v);
    out += b;
  };
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) hex4(c);
          else out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    // Decode one UTF-8 sequence.
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + len > s.size()) len = 1;
    if (!ensure_ascii) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    uint32_t cp = len == 1 ? c : (c & (0x7F >> len));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      hex4(0xD800 + (cp >> 10));
      hex4(0xDC00 + (cp & 0x3FF));
    } else {
      hex4(cp);
    }
    i += len;
  }
  out += "\"";
  return out;
}

}  // namespace maskd::json_schema_internal
