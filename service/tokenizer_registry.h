// TokenizerRegistry: the tokenizers a server knows, by name.
//
// Loaded once from a folder (one subfolder per tokenizer, named after it,
// holding tokenizer.json[.gz] and optionally tokenizer_config.json and a
// `vocab_size` file with the model's logits width as a decimal integer) and
// extended at run time from tokenizer.json bytes. A name never changes its
// vocabulary once registered. Each name holds one TokenizerContext (the
// vocabulary, its token trie and loop-mask memo), shared by every index
// compiled for it. A registered tokenizer stays until the server stops, and
// so does its unit of the registering client's share
// (--max-tokenizers-per-client). Thread-safe; lookups take a reader lock (not
// on the Step path: sessions hold their tokenizer through their index).
#ifndef MASKD_SERVICE_TOKENIZER_REGISTRY_H_
#define MASKD_SERVICE_TOKENIZER_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "service/client_shares.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd {

struct TokenizerEntry {
  std::string name;
  std::string source;  // "dir" or "registered"
  std::shared_ptr<const TokenizerContext> context;  // never null
  const Vocabulary& vocab() const { return context->vocabulary(); }
};

class TokenizerRegistry {
 public:
  // At most `max_tokenizers` names (RESOURCE_EXHAUSTED past that), of which
  // at most `max_per_client` registered by one client (0: no cap). Each
  // tokenizer's shared loop masks (tokenizer/loop_masks.h) keep at most
  // `loop_mask_bytes`.
  explicit TokenizerRegistry(size_t max_tokenizers = 64,
                             size_t loop_mask_bytes = LoopMasks::kDefaultMaxBytes,
                             size_t max_per_client = 0)
      : max_tokenizers_(max_tokenizers),
        loop_mask_bytes_(loop_mask_bytes),
        shares_("registered tokenizers", "--max-tokenizers-per-client", max_per_client) {}

  // Loads every subfolder of `dir` (following symlinks). `vocab_sizes`
  // overrides a folder's `vocab_size` file, by name. Returns the names loaded;
  // a subfolder that fails to load is reported in `errors` (one line each)
  // and skipped. Fails only when `dir` cannot be read.
  absl::StatusOr<std::vector<std::string>> LoadDir(
      const std::string& dir, const std::map<std::string, uint32_t>& vocab_sizes,
      std::vector<std::string>* errors);

  // Adds `name` from documents, charged to `client` (its ClientKey; ""
  // for an in-process caller). ALREADY_EXISTS when `name` is taken by a
  // different vocabulary (same content: returns the existing entry, charging
  // nothing). RESOURCE_EXHAUSTED naming --max-tokenizers-per-client when the
  // client has registered its whole share (checked before parsing, too),
  // --max-tokenizers when the registry is full.
  absl::StatusOr<TokenizerEntry> Register(absl::string_view name, absl::string_view tokenizer_json,
                                          absl::string_view config_json,
                                          const VocabularyOptions& options,
                                          absl::string_view client = "");

  // NOT_FOUND when unknown.
  absl::StatusOr<TokenizerEntry> Get(absl::string_view name) const;
  // Sorted by name.
  std::vector<TokenizerEntry> List() const;
  size_t size() const;

  // [A-Za-z0-9._-]{1,64}
  static bool ValidName(absl::string_view name);

 private:
  // `client` null: not charged to anyone (loaded from the folder).
  absl::Status Add(TokenizerEntry entry, const absl::string_view* client = nullptr);
  // `vocab`'s context, its memo bounded by loop_mask_bytes_.
  std::shared_ptr<const TokenizerContext> MakeContext(
      std::shared_ptr<const Vocabulary> vocab) const;

  const size_t max_tokenizers_;
  const size_t loop_mask_bytes_;
  mutable absl::Mutex mu_;
  std::map<std::string, TokenizerEntry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
  ClientShares shares_;
  // One per registered tokenizer, held for the life of the registry.
  std::vector<ClientShares::Charge> charges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maskd

#endif  // MASKD_SERVICE_TOKENIZER_REGISTRY_H_
