// maskd_example: constrain one generation with a running maskd.
//   maskd_example ADDR TOKENIZER REGEX
// Creates a session, then repeatedly takes the lowest allowed token (a
// stand-in for sampling), until EOS or 64 steps; prints the token ids.
#include <cstdio>
#include <string>

#include "client/client.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ADDR TOKENIZER REGEX\n", argv[0]);
    return 2;
  }
  auto client = maskd::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  maskd::v1::CompileRequest compile;
  compile.set_tokenizer(argv[2]);
  compile.set_regex(argv[3]);
  auto session = (*client)->CreateSession(compile);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  maskd::v1::StepRequest req;  // reused every step, with its reply
  maskd::v1::StepResponse resp;
  maskd::v1::StepEntry* entry = req.add_entries();
  entry->set_session_id(session->session_id());
  for (int step = 0; step < 64; ++step) {
    if (absl::Status s = (*client)->Step(req, &resp); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    if (resp.results(0).status().code() != 0) {
      std::fprintf(stderr, "%s\n", resp.results(0).status().message().c_str());
      return 1;
    }
    if (resp.results(0).finished()) break;
    std::vector<uint32_t> allowed = maskd::AllowedTokens(maskd::MaskRow(resp, 0));
    if (allowed.empty()) break;
    entry->clear_tokens();
    entry->add_tokens(allowed.front());
    std::printf("%u ", allowed.front());
  }
  std::printf("\n");
  return (*client)->CloseSession(session->session_id()).ok() ? 0 : 1;
}
