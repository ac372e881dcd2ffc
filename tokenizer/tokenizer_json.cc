#include "tokenizer/tokenizer_json.h"

#include <array>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "json/json_scan.h"
#include "nlohmann/json.hpp"
#include "simdjson.h"

namespace maskd::internal {

static_assert(kJsonPadding >= simdjson::SIMDJSON_PADDING);

namespace {

namespace dom = simdjson::dom;

// absl::string_view is not std::string_view in this Abseil build.
inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Nesting limit for decoder / pre_tokenizer Sequences.
constexpr int kMaxDecoderDepth = 16;
// Error messages quote document content; each problem is cut to this.
constexpr size_t kMaxProblemBytes = 1024;
// Nesting limit for tokenizer_config.json (simdjson's own for tokenizer.json).
constexpr size_t kMaxConfigDepth = 1024;

// ---------------------------------------------------------------------------
// GPT-2 byte<->unicode table, inverted: code point -> byte, -1 when the code
// point is not in the table. Printable bytes (0x21-0x7E, 0xA1-0xAC,
// 0xAE-0xFF) stand for themselves; the other 68 bytes, in increasing order,
// are U+0100..U+0143.
struct ByteLevelTable {
  static constexpr int kSize = 0x144;
  std::array<int16_t, kSize> byte_of{};
};

constexpr ByteLevelTable MakeByteLevelTable() {
  ByteLevelTable t;
  for (int i = 0; i < ByteLevelTable::kSize; ++i) t.byte_of[i] = -1;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                     (b >= 0xAE && b <= 0xFF);
    if (printable) {
      t.byte_of[b] = static_cast<int16_t>(b);
    } else {
      t.byte_of[256 + n++] = static_cast<int16_t>(b);
    }
  }
  return t;
}

constexpr ByteLevelTable kByteLevel = MakeByteLevelTable();
static_assert(kByteLevel.byte_of[0x120] == ' ');   // 'Ġ'
static_assert(kByteLevel.byte_of[0x10A] == '\n');  // 'Ċ'
static_assert(kByteLevel.byte_of[0x143] == 0xAD);  // the last one

// Decodes one UTF-8 code point at s[i]; advances i. -1 on a malformed
// sequence (cannot happen for simdjson-validated strings; checked anyway).
int32_t NextCodePoint(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return -1;
  int32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (d & 0x3F);
  }
  i += len;
  return cp;
}

void AppendByteLevel(std::string_view token, std::string* out) {
  const size_t start = out->size();
  size_t i = 0;
  while (i < token.size()) {
    auto c = static_cast<unsigned char>(token[i]);
    if (c >= 0x21 && c <= 0x7E) {  // fast path: printable ASCII is itself
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    int32_t cp = NextCodePoint(token, i);
    if (cp < 0 || cp >= ByteLevelTable::kSize || kByteLevel.byte_of[cp] < 0) {
      // Not a byte-level string: the ByteLevel decoder keeps its UTF-8.
      out->resize(start);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(kByteLevel.byte_of[cp]));
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xXX>" -> XX, else -1. The two characters are parsed like Rust's
// u8::from_str_radix(_, 16), which HF's ByteFallback uses: two hex digits,
// or '+' and one hex digit.
int ByteFallbackValue(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
  if (lo < 0) return -1;
  if (t[3] == '+') return lo;
  if (hi < 0) return -1;
  return hi * 16 + lo;
}

void AppendSentencePiece(const DecoderRules& rules, std::string_view token,
                         std::string* out) {
  const size_t start = out->size();
  const std::string_view marker = rules.space_marker;
  if (marker.empty()) {
    out->append(token);
  } else {
    size_t i = 0;
    while (i < token.size()) {
      size_t j = token.find(marker, i);
      if (j == std::string_view::npos) {
        out->append(token.substr(i));
        break;
      }
      out->append(token.substr(i, j - i));
      out->push_back(' ');
      i = j + marker.size();
    }
  }
  if (rules.byte_fallback && out->size() - start == 6) {
    int b = ByteFallbackValue(std::string_view(*out).substr(start));
    if (b >= 0) {
      out->resize(start);
      out->push_back(static_cast<char>(b));
    }
  }
}

// ---------------------------------------------------------------------------
// What a decoder (or pre_tokenizer) tree says about token bytes.
struct DecoderScan {
  bool byte_level = false;
  bool sentencepiece = false;
  bool byte_fallback = false;
  std::string space_marker;
};

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  // Problems quote document content (keys, type names): at most 1 KiB.
  absl::Status Error(std::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(source_), ": ", Excerpt(problem, kMaxProblemBytes)));
  }
  absl::Status JsonError(simdjson::error_code e) const {
    return Error(absl::StrCat("malformed JSON: ", simdjson::error_message(e)));
  }

  absl::StatusOr<ParsedTokenizer> ParseTokenizer(std::string_view json);

 private:
  absl::Status ParseDocument(std::string_view json, dom::object* root);
  absl::Status ParseModel(dom::element model);
  absl::Status ParseAddedTokens(dom::element added);
  absl::Status ScanDecoder(dom::element v, bool is_decoder, int depth,
                           std::string_view where, DecoderScan* scan);
  absl::StatusOr<uint32_t> CheckId(uint64_t id, std::string_view where);
  absl::Status AddString(std::string_view s, uint32_t id, bool special,
                         std::vector<RawToken>* out);

  std::string_view source_;
  dom::parser parser_;
  ParsedTokenizer out_;
};

absl::Status Parser::ParseDocument(std::string_view json, dom::object* root) {
  dom::element doc;
  // The buffer is padded (kJsonPadding), so simdjson need not copy it. The
  // DOM parser (unlike On Demand) picks the best SIMD kernel at run time.
  if (auto e = parser_.parse(json.data(), json.size(), false).get(doc); e) {
    // simdjson refuses bytes after the document (a NUL and garbage too) but
    // says not where: the structural scan does, at no cost to good files.
    const std::string what = absl::StrCat(Av(source_), ": malformed JSON");
    if (auto s = CheckJsonStructure(json, {.max_depth = 0}, what); !s.ok()) return s;
    return JsonError(e);
  }
  if (doc.get_object().get(*root) != simdjson::SUCCESS) return Error("not a JSON object");
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Parser::CheckId(uint64_t id, std::string_view where) {
  if (id >= kMaxTokenIds) {
    return Error(absl::StrCat("token id ", id, " in ", Av(where),
                              " is out of range (ids must be < ", kMaxTokenIds, ")"));
  }
  return static_cast<uint32_t>(id);
}

absl::Status Parser::AddString(std::string_view s, uint32_t id, bool special,
                               std::vector<RawToken>* out) {
  // Offsets are 32-bit; documents are capped far below 4 GiB by the reader,
  // and unescaped strings are never longer than their JSON.
  if (out_.strings.size() + s.size() > std::numeric_limits<uint32_t>::max()) {
    return Error("token strings exceed 4 GiB");
  }
  out->push_back(RawToken{id, static_cast<uint32_t>(out_.strings.size()),
                          static_cast<uint32_t>(s.size()), special});
  out_.strings.append(s);
  return absl::OkStatus();
}

absl::Status Parser::ParseModel(dom::element model_value) {
  dom::object model;
  if (model_value.get_object().get(model) != simdjson::SUCCESS) {
    return Error("\"model\" is not an object");
  }
  std::string_view type;
  dom::element type_value;
  if (model["type"].get(type_value) != simdjson::SUCCESS) return Error("model.type is missing");
  if (type_value.get_string().get(type) != simdjson::SUCCESS) {
    return Error("model.type is not a string");
  }
  dom::element vocab;
  bool have_vocab = model["vocab"].get(vocab) == simdjson::SUCCESS;
  if (type == "BPE") {
    dom::object obj;
    if (!have_vocab || vocab.get_object().get(obj) != simdjson::SUCCESS) {
      return Error("model.vocab (an object of token -> id) is missing");
    }
    out_.vocab.reserve(obj.size());
    for (dom::key_value_pair kv : obj) {
      uint64_t id;
      if (auto e = kv.value.get_uint64().get(id); e) {
        return Error(absl::StrCat("model.vocab: the id of token \"", Excerpt(kv.key),
                                  "\" is not an unsigned integer (",
                                  simdjson::error_message(e), ")"));
      }
      absl::StatusOr<uint32_t> checked = CheckId(id, "model.vocab");
      if (!checked.ok()) return checked.status();
      if (auto s = AddString(kv.key, *checked, false, &out_.vocab); !s.ok()) return s;
    }
  } else if (type == "Unigram") {
    // "vocab" is [[piece, score], ...]; a piece's id is its index.
    dom::array arr;
    if (!have_vocab || vocab.get_array().get(arr) != simdjson::SUCCESS) {
      return Error("model.vocab (an array of [piece, score]) is missing");
    }
    uint64_t index = 0;
    for (dom::element entry : arr) {
      dom::array pair;
      std::string_view piece;
      if (entry.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
          pair.at(0).get_string().get(piece) != simdjson::SUCCESS) {
        return Error(absl::StrCat("model.vocab[", index, "] is not a [piece, score] pair"));
      }
      absl::StatusOr<uint32_t> checked = CheckId(index, "model.vocab");
      if (!checked.ok()) return checked.status();
      if (auto s = AddString(piece, *checked, false, &out_.vocab); !s.ok()) return s;
      ++index;
    }
  } else {
    return Error(absl::StrCat("unsupported model type ", Excerpt(type), " (supported: BPE, Unigram)"));
  }
  // Everything else (merges above all: half of a large file) is ignored.
  return absl::OkStatus();
}

absl::Status Parser::ParseAddedTokens(dom::element added_value) {
  if (added_value.is_null()) return absl::OkStatus();
  dom::array added;
  if (added_value.get_array().get(added) != simdjson::SUCCESS) {
    return Error("added_tokens is not an array");
  }
  out_.added.reserve(added.size());
  uint64_t index = 0;
  for (dom::element entry_value : added) {
    dom::object entry;
    if (entry_value.get_object().get(entry) != simdjson::SUCCESS) {
      return Error(absl::StrCat("added_tokens[", index, "] is not an object"));
    }
    dom::element v;
    uint64_t id;
    std::string_view content;
    bool special = false;
    if (entry["id"].get(v) != simdjson::SUCCESS) {
      return Error(absl::StrCat("added_tokens[", index, "] has no id"));
    }
    if (v.get_uint64().get(id) != simdjson::SUCCESS) {
      return Error(absl::StrCat("added_tokens[", index, "].id is not an unsigned integer"));
    }
    if (entry["content"].get(v) != simdjson::SUCCESS) {
      return Error(absl::StrCat("added_tokens[", index, "] has no content"));
    }
    if (v.get_string().get(content) != simdjson::SUCCESS) {
      return Error(absl::StrCat("added_tokens[", index, "].content is not a string"));
    }
    if (entry["special"].get(v) == simdjson::SUCCESS && !v.is_null() &&
        v.get_bool().get(special) != simdjson::SUCCESS) {
      return Error(absl::StrCat("added_tokens[", index, "].special is not a boolean"));
    }
    absl::StatusOr<uint32_t> checked = CheckId(id, "added_tokens");
    if (!checked.ok()) return checked.status();
    if (auto s = AddString(content, *checked, special, &out_.added); !s.ok()) return s;
    ++index;
  }
  return absl::OkStatus();
}

// Walks a decoder (is_decoder) or pre_tokenizer tree, recording what decides
// token bytes. Unknown decoders are errors (they may change bytes in ways
// maskd does not model); unknown pre-tokenizers are ignored.
absl::Status Parser::ScanDecoder(dom::element v, bool is_decoder, int depth,
                                 std::string_view where, DecoderScan* scan) {
  if (v.is_null()) return absl::OkStatus();
  if (depth > kMaxDecoderDepth) return Error(absl::StrCat(Av(where), " is nested too deeply"));
  dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return Error(absl::StrCat(Av(where), " is not an object"));
  }
  std::string_view type;
  if (obj["type"].get_string().get(type) != simdjson::SUCCESS) {
    return Error(absl::StrCat(Av(where), " has no type"));
  }
  if (type == "Sequence") {
    dom::array list;
    if (obj[is_decoder ? "decoders" : "pretokenizers"].get_array().get(list) !=
        simdjson::SUCCESS) {
      return Error(absl::StrCat(Av(where), ": Sequence without a list"));
    }
    for (dom::element child : list) {
      if (auto s = ScanDecoder(child, is_decoder, depth + 1, where, scan); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    scan->byte_level = true;
  } else if (type == "Metaspace") {
    std::string_view replacement = "\xE2\x96\x81";  // U+2581, the default
    if (obj["replacement"].get_string().get(replacement) != simdjson::SUCCESS) {
      replacement = "\xE2\x96\x81";
    }
    scan->sentencepiece = true;
    scan->space_marker = std::string(replacement);
  } else if (!is_decoder) {
    // Other pre-tokenizers do not decide bytes.
  } else if (type == "Replace") {
    std::string_view pattern, content;
    if (obj["pattern"]["String"].get_string().get(pattern) != simdjson::SUCCESS ||
        pattern.empty() || obj["content"].get_string().get(content) != simdjson::SUCCESS ||
        content != " ") {
      return Error("unsupported decoder Replace (only a literal string -> \" \", the "
                   "SentencePiece space marker, is supported)");
    }
    scan->sentencepiece = true;
    scan->space_marker = std::string(pattern);
  } else if (type == "ByteFallback") {
    scan->sentencepiece = true;
    scan->byte_fallback = true;
  } else if (type == "Fuse" || type == "Strip") {
    // Fuse joins a sequence's tokens; Strip trims the start/end of the whole
    // decoded text (llama2: the first space). Neither changes a token's bytes.
  } else {
    return Error(absl::StrCat("unsupported decoder type ", Excerpt(type)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedTokenizer> Parser::ParseTokenizer(std::string_view json) {
  dom::object root;
  if (auto s = ParseDocument(json, &root); !s.ok()) return s;
  dom::element v;
  if (root["model"].get(v) != simdjson::SUCCESS) return Error("no \"model\"");
  if (auto s = ParseModel(v); !s.ok()) return s;
  if (root["added_tokens"].get(v) == simdjson::SUCCESS) {
    if (auto s = ParseAddedTokens(v); !s.ok()) return s;
  }
  DecoderScan decoder, pre_tokenizer;
  if (root["decoder"].get(v) == simdjson::SUCCESS) {
    if (auto s = ScanDecoder(v, true, 0, "decoder", &decoder); !s.ok()) return s;
  }
  if (root["pre_tokenizer"].get(v) == simdjson::SUCCESS) {
    if (auto s = ScanDecoder(v, false, 0, "pre_tokenizer", &pre_tokenizer); !s.ok()) return s;
  }

  // The decoder decides; the pre-tokenizer only when the decoder says nothing.
  const bool decoder_decides = decoder.byte_level || decoder.sentencepiece;
  const DecoderScan& scan = decoder_decides ? decoder : pre_tokenizer;
  if (scan.byte_level && scan.sentencepiece) {
    return Error(decoder_decides ? "decoder mixes ByteLevel and SentencePiece-style steps"
                                 : "pre_tokenizer mixes ByteLevel and Metaspace");
  }
  if (scan.byte_level) {
    out_.rules.kind = TokenizerKind::kByteLevel;
  } else if (scan.sentencepiece) {
    out_.rules.kind = TokenizerKind::kSentencePiece;
    out_.rules.space_marker = scan.space_marker;
    out_.rules.byte_fallback = scan.byte_fallback;
  } else {
    return Error("cannot tell how token strings map to bytes: neither the decoder nor the "
                 "pre_tokenizer is ByteLevel or SentencePiece-style (Metaspace, Replace "
                 "\"\xE2\x96\x81\", ByteFallback)");
  }
  return std::move(out_);
}

}  // namespace

absl::StatusOr<ParsedTokenizer> ParseTokenizerJson(std::string_view json,
                                                   std::string_view source) {
  return Parser(source).ParseTokenizer(json);
}

// nlohmann rather than simdjson: configs hold integers such as
// "model_max_length": 1000000000000000019884624838656 that simdjson 3.0 refuses
// (BIGINT_ERROR). The callback drops every top-level value but eos_token, so
// gemma3's 1 MB of added_tokens_decoder is never built.
absl::StatusOr<std::optional<std::string>> ParseEosToken(std::string_view text,
                                                         std::string_view source) {
  using nlohmann::json;
  auto error = [&](std::string_view problem) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(source), ": ", Excerpt(problem, kMaxProblemBytes)));
  };
  json::parser_callback_t keep_eos = [](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) return parsed == "eos_token";
    return true;
  };
  // nlohmann's lexer stops at a NUL byte as if the text ended there.
  const std::string what = absl::StrCat(Av(source), ": malformed JSON");
  if (auto s = CheckJsonStructure(text, {.max_depth = kMaxConfigDepth}, what); !s.ok()) return s;
  json root;
  try {
    root = json::parse(text.begin(), text.end(), keep_eos);
  } catch (const json::exception& e) {
    return error(absl::StrCat("malformed JSON: ", e.what()));
  } catch (const std::exception& e) {
    return error(absl::StrCat("cannot parse: ", e.what()));
  }
  if (!root.is_object()) return error("not a JSON object");
  auto it = root.find("eos_token");
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
    return error("eos_token object has no string \"content\"");
  }
  return error("eos_token is neither a string nor an object with \"content\"");
}

void AppendTokenBytes(const DecoderRules& rules, std::string_view token, std::string* out) {
  if (rules.kind == TokenizerKind::kByteLevel) {
    AppendByteLevel(token, out);
  } else {
    AppendSentencePiece(rules, token, out);
  }
}

}  // namespace maskd::internal
