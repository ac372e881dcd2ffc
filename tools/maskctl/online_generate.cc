// maskctl --addr ADDR generate --tokenizer NAME CONSTRAINT (constraint_flags.h)
//   [--seed S] [--max-tokens N] [--no-budget] [--resume]
// Drives one session through Step, choosing uniformly at random among the
// allowed tokens (EOS included), until EOS or N tokens. Budget mode is on
// (StepEntry.max_tokens_left = N minus the tokens so far), so the output
// closes within N tokens wherever the constraint allows; --no-budget turns it
// off (the output may then be cut at N tokens):
// → {"session_id": "...", "tokens": [...], "text": "...", "text_hex": "...", "finished": bool}
// ("text" with invalid UTF-8 replaced by U+FFFD; "text_hex" exact).
// With --resume the session is a maskd::ResumableSession: a server restart
// mid-generation is survived (same tokens as without it), and the line adds
// "resumes": n.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "client/resumable_session.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/constraint_flags.h"
#include "tools/maskctl/online_util.h"

namespace maskctl {
namespace {

// The output line; `resumes` < 0: not a resumable session (no "resumes").
int PrintGenerated(maskd::Client& client, const std::string& tokenizer, uint64_t id,
                   const std::vector<uint32_t>& tokens, bool finished, int resumes) {
  auto text = client.Detokenize(tokenizer, tokens);
  if (!text.ok()) return Fail("generate", text.status().ToString());
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) list += ", ";
    list += std::to_string(tokens[i]);
  }
  std::string extra = resumes < 0 ? "" : ", \"resumes\": " + std::to_string(resumes);
  std::printf(
      "{\"session_id\": \"%llu\", \"tokens\": [%s], \"text\": %s, \"text_hex\": \"%s\", "
      "\"finished\": %s%s}\n",
      static_cast<unsigned long long>(id), list.c_str(), JsonString(*text).c_str(),
      Hex(*text).c_str(), finished ? "true" : "false", extra.c_str());
  return 0;
}

int Generate(const Context& ctx) {
  const Args* args = &ctx.args;
  auto seed = args->GetUint("seed", 0);
  auto max_tokens = args->GetUint("max-tokens", 64);
  if (!seed.ok()) return Fail("generate", std::string(seed.status().message()));
  if (!max_tokens.ok()) return Fail("generate", std::string(max_tokens.status().message()));
  auto compile_or = CompileRequestFromFlags(*args);
  if (!compile_or.ok()) return Fail("generate", std::string(compile_or.status().message()));
  const maskd::v1::CompileRequest& compile = *compile_or;
  const std::string& tokenizer = compile.tokenizer();
  auto client = OnlineConnect(ctx);
  if (!client.ok()) return Fail("generate", std::string(client.status().message()));
  std::mt19937_64 rng(*seed);
  std::vector<uint32_t> tokens;
  maskd::v1::StepResponse resp;
  bool finished = false;
  const bool budget = !args->Has("no-budget");
  // Budget mode's max_tokens_left before the next token: >= 1 inside the loop.
  auto left = [&] { return budget ? static_cast<uint32_t>(*max_tokens - tokens.size()) : 0u; };
  if (args->Has("resume")) {
    auto rs = maskd::ResumableSession::Create(client->get(), compile);
    if (!rs.ok()) return Fail("generate", rs.status().ToString());
    std::vector<uint32_t> last;
    for (;;) {
      if (absl::Status s = (*rs)->Step(last, &resp, 0, 0, left()); !s.ok()) {
        return Fail("generate", s.ToString());
      }
      finished = resp.results(0).finished();
      if (finished || tokens.size() >= *max_tokens) break;
      int64_t t = RandomAllowed(maskd::MaskRow(resp, 0), {}, rng);
      if (t < 0) break;
      tokens.push_back(static_cast<uint32_t>(t));
      last = {static_cast<uint32_t>(t)};
    }
    return PrintGenerated(**client, tokenizer, (*rs)->session_id(), tokens, finished,
                          (*rs)->resumes());
  }
  auto session = (*client)->CreateSession(compile);
  if (!session.ok()) return Fail("generate", session.status().ToString());
  const uint64_t id = session->session_id();
  maskd::v1::StepRequest req;
  maskd::v1::StepEntry* entry = req.add_entries();
  entry->set_session_id(id);
  for (;;) {
    entry->set_max_tokens_left(left());
    if (absl::Status s = (*client)->Step(req, &resp); !s.ok()) {
      (void)(*client)->CloseSession(id);
      return Fail("generate", s.ToString());
    }
    const auto& r = resp.results(0);
    if (r.status().code() != 0) {
      (void)(*client)->CloseSession(id);
      return Fail("generate", r.status().message());
    }
    finished = r.finished();
    if (finished || tokens.size() >= *max_tokens) break;
    int64_t t = RandomAllowed(maskd::MaskRow(resp, 0), {}, rng);
    if (t < 0) break;  // cannot happen: a live state always allows something
    tokens.push_back(static_cast<uint32_t>(t));
    entry->clear_tokens();
    entry->add_tokens(static_cast<uint32_t>(t));
  }
  (void)(*client)->CloseSession(id);
  return PrintGenerated(**client, tokenizer, id, tokens, finished, -1);
}

}  // namespace
MASKCTL_COMMAND(generate, "generate",
                "random constrained generation through one session, closed within N tokens (budget "
                "mode; --no-budget: cut at N) (--resume: survives a server restart)",
                Form{},
                OnlineConstraintForm("generate --tokenizer NAME CONSTRAINT"
                                     " [--seed S] [--max-tokens N] [--no-budget] [--resume]",
                                     {"seed", "max-tokens"}, {"resume", "no-budget"}),
                Generate);

}  // namespace maskctl
