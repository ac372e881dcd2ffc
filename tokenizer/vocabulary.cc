#include "tokenizer/vocabulary.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tokenizer/json_blank.h"
#include "tokenizer/json_file.h"
#include "tokenizer/tokenizer_json.h"
#include "json/json_scan.h"

namespace maskd {

std::string_view TokenizerKindName(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kByteLevel:
      return "byte_level";
    case TokenizerKind::kSentencePiece:
      return "sentencepiece";
  }
  return "unknown";
}

Vocabulary::Vocabulary() = default;
Vocabulary::~Vocabulary() = default;

bool Vocabulary::is_eos(uint32_t id) const {
  return std::binary_search(eos_ids_.begin(), eos_ids_.end(), id);
}

namespace {

// absl::string_view is not std::string_view in this Abseil build.
inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr char kHashMagic[] = "maskd-vocab-v1\n";  // 15 bytes hashed, no NUL

void PutU32(uint32_t v, std::string* out) {
  char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
               static_cast<char>(v >> 24)};
  out->append(b, 4);
}

// Feeds `buf` to the digest when it is large, keeping updates few and big.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1;
    buf_.reserve(kChunk + 256);
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  std::string* buf() { return &buf_; }
  void MaybeFlush() {
    if (buf_.size() >= kChunk) Flush();
  }
  void Append(std::string_view bytes) {
    if (bytes.size() >= kChunk) {
      Flush();
      Update(bytes);
    } else {
      buf_.append(bytes);
      MaybeFlush();
    }
  }
  // Lowercase hex digest, or "" when OpenSSL failed.
  std::string HexDigest() {
    Flush();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_, md, &len) != 1) return "";
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) {
      hex.push_back(kHex[md[i] >> 4]);
      hex.push_back(kHex[md[i] & 15]);
    }
    return hex;
  }

 private:
  static constexpr size_t kChunk = 1 << 16;
  void Update(std::string_view b) {
    if (ok_ && !b.empty()) ok_ = EVP_DigestUpdate(ctx_, b.data(), b.size()) == 1;
  }
  void Flush() {
    Update(buf_);
    buf_.clear();
  }
  EVP_MD_CTX* ctx_;
  bool ok_ = false;
  std::string buf_;
};

}  // namespace

// Assembles a Vocabulary from a parsed tokenizer.json (friend of Vocabulary).
class VocabularyBuilder {
 public:
  static absl::StatusOr<std::shared_ptr<const Vocabulary>> Build(
      const internal::ParsedTokenizer& parsed, const std::optional<std::string>& config_eos,
      const VocabularyOptions& options, std::string_view source,
      std::string_view config_source);

 private:
  static std::string ContentHash(const Vocabulary& v);
};

std::string VocabularyBuilder::ContentHash(const Vocabulary& v) {
  Sha256 sha;
  std::string* buf = sha.buf();
  buf->append(kHashMagic, sizeof(kHashMagic) - 1);
  PutU32(v.size_, buf);
  for (uint32_t id = 0; id < v.size_; ++id) {
    std::string_view b = v.bytes(id);
    buf->push_back(static_cast<char>((v.has_token(id) ? 1 : 0) | (v.is_special(id) ? 2 : 0)));
    PutU32(static_cast<uint32_t>(b.size()), buf);
    sha.Append(b);
  }
  PutU32(static_cast<uint32_t>(v.eos_ids_.size()), buf);
  for (uint32_t id : v.eos_ids_) PutU32(id, buf);
  return sha.HexDigest();
}

// Ids beyond twice the tokens a tokenizer may span (see Build).
constexpr uint64_t kMaxSparseIds = 65536;

absl::StatusOr<std::shared_ptr<const Vocabulary>> VocabularyBuilder::Build(
    const internal::ParsedTokenizer& parsed, const std::optional<std::string>& config_eos,
    const VocabularyOptions& options, std::string_view source, std::string_view config_source) {
  auto error = [&](std::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(Av(source), ": ", Av(problem)));
  };
  if (parsed.vocab.empty() && parsed.added.empty()) return error("the tokenizer has no tokens");

  // Ids are < internal::kMaxTokenIds (checked by the parser).
  uint32_t max_id = 0;
  for (const auto& t : parsed.vocab) max_id = std::max(max_id, t.id);
  for (const auto& t : parsed.added) max_id = std::max(max_id, t.id);
  uint32_t size = max_id + 1;
  if (options.vocab_size.has_value()) {
    uint32_t want = *options.vocab_size;
    if (want < size) {
      return error(absl::StrCat("vocab_size ", want, " is smaller than the highest token id ",
                                max_id, " + 1"));
    }
    if (want > internal::kMaxTokenIds) {
      return error(absl::StrCat("vocab_size ", want, " is out of range (at most ",
                                internal::kMaxTokenIds, ")"));
    }
    size = want;
  }
  // Every id costs memory and time (rows, per-id tables) whether a token has
  // it or not: a short document must not buy a huge id space. Real
  // tokenizers are dense, and a model's logits pad a few hundred ids at most.
  const uint64_t tokens = parsed.vocab.size() + parsed.added.size();
  if (uint64_t{size} > 2 * tokens + kMaxSparseIds) {
    return error(absl::StrCat("ids span ", size, " (highest id or vocab_size) for ", tokens,
                              " tokens: at most 2 x tokens + ", kMaxSparseIds));
  }

  // slot[id]: which raw token the id's bytes come from. Added tokens win over
  // model.vocab entries with the same id (as in HF's id_to_token / decode).
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  constexpr uint32_t kAdded = 0x80000000u;
  std::vector<uint32_t> slot(size, kNone);
  for (size_t i = 0; i < parsed.vocab.size(); ++i) {
    uint32_t id = parsed.vocab[i].id;
    if (slot[id] != kNone) return error(absl::StrCat("duplicate token id ", id, " in model.vocab"));
    slot[id] = static_cast<uint32_t>(i);
  }
  for (size_t j = 0; j < parsed.added.size(); ++j) {
    uint32_t id = parsed.added[j].id;
    if (slot[id] != kNone && (slot[id] & kAdded) != 0) {
      return error(absl::StrCat("duplicate token id ", id, " in added_tokens"));
    }
    slot[id] = kAdded | static_cast<uint32_t>(j);
  }

  auto v = std::shared_ptr<Vocabulary>(new Vocabulary());
  v->size_ = size;
  v->kind_ = parsed.rules.kind;
  v->offsets_.resize(size_t{size} + 1);
  v->present_.assign((size_t{size} + 63) / 64, 0);
  v->special_.assign((size_t{size} + 63) / 64, 0);
  // Decoding never lengthens a token string, so the blob fits in this.
  v->blob_.reserve(parsed.strings.size());
  for (uint32_t id = 0; id < size; ++id) {
    v->offsets_[id] = static_cast<uint32_t>(v->blob_.size());
    uint32_t s = slot[id];
    if (s == kNone) continue;
    const internal::RawToken& t = (s & kAdded) ? parsed.added[s & ~kAdded] : parsed.vocab[s];
    v->present_[id >> 6] |= uint64_t{1} << (id & 63);
    ++v->num_tokens_;
    if (t.special) {
      // Special tokens are never text; keep their name's UTF-8 for display.
      v->special_[id >> 6] |= uint64_t{1} << (id & 63);
      ++v->num_special_;
      v->blob_.append(parsed.str(t));
    } else {
      // Non-special added tokens are text and go through the decoder like
      // every other token, as HF decode does (gemma3's "▁▁" is two spaces).
      internal::AppendTokenBytes(parsed.rules, parsed.str(t), &v->blob_);
    }
  }
  v->offsets_[size] = static_cast<uint32_t>(v->blob_.size());

  if (!options.eos_ids.empty()) {
    for (uint32_t id : options.eos_ids) {
      if (id >= size) {
        return error(absl::StrCat("EOS id ", id, " is out of range (vocab size ", size, ")"));
      }
    }
    v->eos_ids_ = options.eos_ids;
  } else if (config_eos.has_value()) {
    // As HF's token_to_id: added tokens first, then the model's vocab.
    std::optional<uint32_t> found;
    for (const auto& t : parsed.added) {
      if (parsed.str(t) == *config_eos) {
        found = t.id;
        break;
      }
    }
    for (size_t i = 0; !found && i < parsed.vocab.size(); ++i) {
      if (parsed.str(parsed.vocab[i]) == *config_eos) found = parsed.vocab[i].id;
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          Av(config_source), ": eos_token \"", internal::Excerpt(*config_eos),
          "\" is not a token of ", Av(source)));
    }
    v->eos_ids_.push_back(*found);
  }
  std::sort(v->eos_ids_.begin(), v->eos_ids_.end());
  v->eos_ids_.erase(std::unique(v->eos_ids_.begin(), v->eos_ids_.end()), v->eos_ids_.end());

  v->content_hash_ = ContentHash(*v);
  if (v->content_hash_.empty()) {
    return absl::InternalError(absl::StrCat(Av(source), ": SHA-256 (OpenSSL EVP) failed"));
  }
  return std::shared_ptr<const Vocabulary>(std::move(v));
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::Load(
    const std::string& path, const VocabularyOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string tokenizer_path = path;
  if (fs::is_directory(path, ec)) {
    tokenizer_path.clear();
    for (const char* name : {"tokenizer.json", "tokenizer.json.gz"}) {
      std::string candidate = (fs::path(path) / name).string();
      if (fs::exists(candidate, ec)) {
        tokenizer_path = candidate;
        break;
      }
    }
    if (tokenizer_path.empty()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no tokenizer.json or tokenizer.json.gz in this folder"));
    }
  }
  absl::StatusOr<internal::JsonBuffer> tokenizer = internal::ReadJsonFile(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();

  // The config only contributes the EOS; with an override it is not read.
  std::optional<std::string> config_eos;
  std::string config_path;
  if (options.eos_ids.empty()) {
    fs::path dir = fs::path(tokenizer_path).parent_path();
    for (const char* name : {"tokenizer_config.json", "tokenizer_config.json.gz"}) {
      std::string candidate = (dir / name).string();
      if (fs::exists(candidate, ec)) {
        config_path = candidate;
        break;
      }
    }
    if (!config_path.empty()) {
      absl::StatusOr<internal::JsonBuffer> config = internal::ReadJsonFile(config_path);
      if (!config.ok()) return config.status();
      absl::StatusOr<std::optional<std::string>> eos =
          internal::ParseEosToken(config->view(), config_path);
      if (!eos.ok()) return eos.status();
      config_eos = *std::move(eos);
    }
  }

  internal::BlankArrayValues(tokenizer->mutable_data(), tokenizer->size(), "merges");
  absl::StatusOr<internal::ParsedTokenizer> parsed =
      internal::ParseTokenizerJson(tokenizer->view(), tokenizer_path);
  if (!parsed.ok()) return parsed.status();
  tokenizer = internal::JsonBuffer();  // free the document early
  return VocabularyBuilder::Build(*parsed, config_eos, options, tokenizer_path, config_path);
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> Vocabulary::FromJson(
    std::string_view tokenizer_json, std::string_view config_json,
    const VocabularyOptions& options, std::string_view source) {
  const std::string config_source = absl::StrCat(Av(source), " (tokenizer_config)");
  std::optional<std::string> config_eos;
  if (!config_json.empty() && options.eos_ids.empty()) {
    internal::JsonBuffer config = internal::CopyToJsonBuffer(config_json);
    absl::StatusOr<std::optional<std::string>> eos =
        internal::ParseEosToken(config.view(), config_source);
    if (!eos.ok()) return eos.status();
    config_eos = *std::move(eos);
  }
  internal::JsonBuffer tokenizer = internal::CopyToJsonBuffer(tokenizer_json);
  internal::BlankArrayValues(tokenizer.mutable_data(), tokenizer.size(), "merges");
  absl::StatusOr<internal::ParsedTokenizer> parsed =
      internal::ParseTokenizerJson(tokenizer.view(), source);
  if (!parsed.ok()) return parsed.status();
  return VocabularyBuilder::Build(*parsed, config_eos, options, source, config_source);
}

}  // namespace maskd
