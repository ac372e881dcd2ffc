#include "service/tokenizer_registry.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/quote.h"

namespace maskd {

bool TokenizerRegistry::ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return name != "." && name != "..";
}

absl::StatusOr<std::vector<std::string>> TokenizerRegistry::LoadDir(
    const std::string& dir, const std::map<std::string, uint32_t>& vocab_sizes,
    std::vector<std::string>* errors) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("tokenizer folder '", dir, "' is not a directory"));
  }
  std::vector<std::string> names;
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (fs::is_directory(e.path(), ec)) subdirs.push_back(e.path());
  }
  if (ec) return absl::InternalError(absl::StrCat("reading '", dir, "': ", ec.message()));
  std::sort(subdirs.begin(), subdirs.end());
  for (const auto& path : subdirs) {
    std::string name = path.filename().string();
    if (!ValidName(name)) {
      errors->push_back(absl::StrCat("tokenizer folder '", path.string(), "': invalid name"));
      continue;
    }
    bool has_json = fs::exists(path / "tokenizer.json", ec) || fs::exists(path / "tokenizer.json.gz", ec);
    if (!has_json) continue;  // not a tokenizer folder (e.g. an empty placeholder)
    VocabularyOptions options;
    if (auto it = vocab_sizes.find(name); it != vocab_sizes.end()) {
      options.vocab_size = it->second;
    } else if (fs::exists(path / "vocab_size", ec)) {
      std::ifstream in(path / "vocab_size");
      std::stringstream ss;
      ss << in.rdbuf();
      uint32_t n;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ss.str()), &n)) {
        errors->push_back(absl::StrCat("tokenizer '", name, "': vocab_size file is not an integer"));
        continue;
      }
      options.vocab_size = n;
    }
    auto vocab = Vocabulary::Load(path.string(), options);
    if (!vocab.ok()) {
      errors->push_back(absl::StrCat("tokenizer '", name, "': ", vocab.status().message()));
      continue;
    }
    absl::Status s = Add(TokenizerEntry{name, "dir", MakeContext(*std::move(vocab))});
    if (!s.ok()) {
      errors->push_back(absl::StrCat("tokenizer '", name, "': ", s.message()));
      continue;
    }
    names.push_back(name);
  }
  return names;
}

std::shared_ptr<const TokenizerContext> TokenizerRegistry::MakeContext(
    std::shared_ptr<const Vocabulary> vocab) const {
  TokenizerContext::Options options;
  options.loop_mask_bytes = loop_mask_bytes_;
  return TokenizerContext::Create(std::move(vocab), options);
}

absl::Status TokenizerRegistry::Add(TokenizerEntry entry, const absl::string_view* client) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(entry.name);
  if (it != entries_.end()) {
    if (it->second.vocab().content_hash() == entry.vocab().content_hash()) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("tokenizer ", QuoteInput(entry.name), " is already registered with other content"));
  }
  // The client's share first: a client past it is told so, not that the
  // registry is full.
  ClientShares::Charge charge;
  if (client != nullptr) {
    absl::StatusOr<ClientShares::Charge> taken = shares_.Take(*client);
    if (!taken.ok()) return taken.status();
    charge = *std::move(taken);
  }
  if (entries_.size() >= max_tokenizers_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("at most ", max_tokenizers_, " tokenizers (--max-tokenizers)"));
  }
  if (charge.held()) charges_.push_back(std::move(charge));
  std::string name = entry.name;
  entries_.emplace(std::move(name), std::move(entry));
  return absl::OkStatus();
}

absl::StatusOr<TokenizerEntry> TokenizerRegistry::Register(absl::string_view name,
                                                           absl::string_view tokenizer_json,
                                                           absl::string_view config_json,
                                                           const VocabularyOptions& options,
                                                           absl::string_view client) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid tokenizer name ", QuoteInput(name), ": want [A-Za-z0-9._-]{1,64}"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (!entries_.count(name)) {
      // Refused before the (costly) parse; Add checks again.
      if (absl::Status s = shares_.Check(client); !s.ok()) return s;
      if (entries_.size() >= max_tokenizers_) {
        return absl::ResourceExhaustedError(
            absl::StrCat("at most ", max_tokenizers_, " tokenizers (--max-tokenizers)"));
      }
    }
  }
  std::string source = absl::StrCat("registered tokenizer '", name, "'");
  auto vocab = Vocabulary::FromJson(std::string_view(tokenizer_json.data(), tokenizer_json.size()),
                                    std::string_view(config_json.data(), config_json.size()),
                                    options, source);
  if (!vocab.ok()) {
    if (vocab.status().code() == absl::StatusCode::kInvalidArgument) return vocab.status();
    return absl::InvalidArgumentError(vocab.status().message());
  }
  TokenizerEntry entry{std::string(name), "registered", MakeContext(*std::move(vocab))};
  if (absl::Status s = Add(entry, &client); !s.ok()) return s;
  return Get(name);
}

absl::StatusOr<TokenizerEntry> TokenizerRegistry::Get(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown tokenizer ", QuoteInput(name)));
  }
  return it->second;
}

std::vector<TokenizerEntry> TokenizerRegistry::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<TokenizerEntry> out;
  for (const auto& [name, e] : entries_) out.push_back(e);
  return out;
}

size_t TokenizerRegistry::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace maskd
