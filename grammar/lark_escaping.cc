// Lark's eval_escaping: backslash pairs, \" and the escapes \n \t \r \f \xHH
// \uHHHH \UHHHHHHHH are read as Python reads them in a string literal; any
// other backslash stays. Done the way Lark does it (build a Python literal,
// then evaluate it), so its quirks hold: in a regex /\\"/ stands for \".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "automaton/codepoint_set.h"
#include "automaton/utf8.h"
#include "grammar/lark_internal.h"

namespace maskd::grammar::lark_internal {
namespace {

// Lark's rewrite of a literal as written into the body of the Python
// u'''...''' literal it evaluates: escapes Python would read differently
// get a second backslash, \" becomes ", a quote is escaped.
absl::StatusOr<std::string> PythonLiteralBody(std::string_view raw, SourcePos p) {
  std::string w;
  for (size_t i = 0; i < raw.size(); ++i) {
    char n = raw[i];
    w += n;
    if (n != '\\') continue;
    if (i + 1 >= raw.size()) return ErrorAt(p, "literal ended unexpectedly (bad escaping)");
    char n2 = raw[++i];
    if (n2 == '\\') {
      w += "\\\\";
    } else if (std::string_view("Uuxnftr").find(n2) == std::string_view::npos) {
      w += '\\';
    }
    w += n2;
  }
  std::string body;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == '\\' && i + 1 < w.size() && w[i + 1] == '"') {
      body += '"';
      ++i;
    } else if (w[i] == '\'') {
      body += "\\'";
    } else {
      body += w[i];
    }
  }
  return body;
}

// The character a one-letter Python escape \e stands for, if it is one.
std::optional<char> SingleCharEscape(char e) {
  switch (e) {
    case '\\':
    case '\'':
    case '"':
      return e;
    case 'a':
      return '\a';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'v':
      return '\v';
    default:
      return std::nullopt;
  }
}

// The evaluation of a Python u'''...''' literal's body, as UTF-8.
class PythonLiteral {
 public:
  PythonLiteral(std::string_view body, SourcePos p) : body_(body), p_(p) {}

  absl::StatusOr<std::string> Eval() {
    for (i_ = 0; i_ < body_.size(); ++i_) {
      if (body_[i_] != '\\' || i_ + 1 >= body_.size()) {
        out_ += body_[i_];
        continue;
      }
      if (absl::Status st = Escape(body_[++i_]); !st.ok()) return st;
    }
    return std::move(out_);
  }

 private:
  // The escape \e, i_ at e.
  absl::Status Escape(char e) {
    if (std::optional<char> c = SingleCharEscape(e)) {
      out_ += *c;
      return absl::OkStatus();
    }
    switch (e) {
      case '\n':  // a backslash-newline stands for nothing
        return absl::OkStatus();
      case 'x':
        return Hex(2);
      case 'u':
        return Hex(4);
      case 'U':
        return Hex(8);
      case 'N':
        return ErrorAt(p_, "named characters \\N{...} are not supported");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      Octal(e);
    } else {
      out_ += '\\';
      out_ += e;
    }
    return absl::OkStatus();
  }

  // Exactly `digits` hex digits after i_: a scalar value, not a surrogate.
  absl::Status Hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ + 1 >= body_.size()) return ErrorAt(p_, "truncated \\x, \\u or \\U escape");
      char h = body_[++i_];
      int d = (h >= '0' && h <= '9')   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) return ErrorAt(p_, "truncated \\x, \\u or \\U escape");
      v = v * 16 + d;
    }
    if (v > kMaxCodepoint) return ErrorAt(p_, "escape beyond U+10FFFF");
    if (v >= 0xD800 && v <= 0xDFFF) return ErrorAt(p_, "escape of a surrogate codepoint");
    AppendUtf8(&out_, v);
    return absl::OkStatus();
  }

  // Up to three octal digits, the first `first` (at i_): at most U+01FF.
  void Octal(char first) {
    uint32_t v = first - '0';
    for (int k = 0; k < 2 && i_ + 1 < body_.size() && body_[i_ + 1] >= '0' && body_[i_ + 1] <= '7';
         ++k) {
      v = v * 8 + (body_[++i_] - '0');
    }
    AppendUtf8(&out_, v);
  }

  std::string_view body_;
  SourcePos p_;
  size_t i_ = 0;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> EvalEscaping(std::string_view raw, SourcePos p) {
  auto body = PythonLiteralBody(raw, p);
  if (!body.ok()) return body.status();
  return PythonLiteral(*body, p).Eval();
}

}  // namespace maskd::grammar::lark_internal
