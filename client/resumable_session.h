// maskd::ResumableSession: a session that survives a server restart (see
// below); StepResumable steps many of them in one call.
#ifndef MASKD_CLIENT_RESUMABLE_SESSION_H_
#define MASKD_CLIENT_RESUMABLE_SESSION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/client.h"

namespace maskd {

// Resuming sessions after a server restart.
//
// maskd keeps sessions in memory: after a crash or SIGKILL and restart every
// session id answers NOT_FOUND (index ids stay the same: they are content
// hashes, and CreateSession{compile} rebuilds the index). A ResumableSession
// remembers what is needed to rebuild its session anywhere: the constraint
// (its CompileRequest) and the tokens accepted since the start. When a call
// finds the session gone (NOT_FOUND for it) or the server unreachable
// (UNAVAILABLE, the connection dropped), it creates a new session at the same
// constraint, replays the accepted tokens in one Step (in chunks of
// ResumeOptions::replay_chunk_tokens), then redoes the call on the new
// session. Masks depend only on (constraint, tokenizer, tokens), so the caller
// sees exactly the masks an uninterrupted server would have given.
//
// The local token list is the truth: it changes only when the server
// confirmed a step (or rollback). After a transport error the old session is
// abandoned, never stepped again (the lost call may or may not have been
// applied); it expires after the server's --session-ttl if the server lived.
// Entry errors (a token not allowed, a bad id) are returned as they are and
// change nothing. Memory: 4 bytes per accepted token on the client. Not
// thread-safe: one decoding loop owns a ResumableSession (the Client under it
// is shared freely).
struct ResumeOptions {
  // Total time one call may spend recovering (reconnecting, re-creating,
  // replaying) before it gives up with UNAVAILABLE naming the last error.
  absl::Duration recovery_timeout = absl::Seconds(30);
  // Wait between attempts: doubles from `initial_backoff` up to `max_backoff`.
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Seconds(1);
  // Attempts per call (first try included) before giving up.
  int max_attempts = 50;
  // Tokens per replay Step (keep under the server's --max-request-tokens).
  size_t replay_chunk_tokens = 65536;
};

class ResumableSession {
 public:
  // Creates a session at `compile`'s constraint (CreateSession{compile}),
  // retrying as a resume would while the server is unreachable. `client`
  // must outlive the session.
  static absl::StatusOr<std::unique_ptr<ResumableSession>> Create(
      Client* client, const v1::CompileRequest& compile, const ResumeOptions& options = {});
  // Closes the server session (best effort).
  ~ResumableSession();
  ResumableSession(const ResumableSession&) = delete;
  ResumableSession& operator=(const ResumableSession&) = delete;

  // One decoding step: undo `rollback` tokens, advance by `tokens` (accepted
  // since the previous step), and get the next mask: resp->results(0) and
  // MaskRow(*resp, 0), as a one-entry Client::Step. An entry error is
  // returned as a non-OK status (FAILED_PRECONDITION for a token not allowed,
  // ...) with resp->results(0) set and nothing changed. `words_per_row` as in
  // StepRequest; `max_tokens_left` as StepEntry.max_tokens_left (budget mode;
  // 0: none).
  absl::Status Step(absl::Span<const uint32_t> tokens, v1::StepResponse* resp,
                    uint32_t rollback = 0, uint32_t words_per_row = 0,
                    uint32_t max_tokens_left = 0);
  // Undoes the last `n` accepted tokens (INVALID_ARGUMENT, nothing undone,
  // when n > tokens().size()).
  absl::Status Rollback(uint32_t n);
  // A new resumable session in the same state (ForkSession).
  absl::StatusOr<std::unique_ptr<ResumableSession>> Fork();
  // Ends the server session; later calls fail with FAILED_PRECONDITION.
  absl::Status Close();

  // The live server session id (changes on each resume); 0 while lost.
  uint64_t session_id() const { return session_id_; }
  const std::string& index_id() const { return index_id_; }
  uint32_t words_per_row() const { return words_per_row_; }
  // Tokens accepted since the start, as the server confirmed them.
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  // Times this session was re-created after a loss.
  int resumes() const { return resumes_; }
  // Makes the next call re-create the session (testing and the soak test:
  // what a reconnect to another server instance does).
  void MarkLost() { session_id_ = 0; }
  // Re-creates the session now if it is lost (after MarkLost, or when a call
  // through another path found it NOT_FOUND), with the usual retries.
  absl::Status Resume();
  // Records a step the server confirmed (an OK entry) that the caller made on
  // session_id() through another path: its own StepStream or
  // SharedMemory.StepInRegion. Keeps tokens() the truth for a later resume.
  void Accepted(uint32_t rollback, absl::Span<const uint32_t> tokens) { Commit(rollback, tokens); }

 private:
  friend absl::Status StepResumable(absl::Span<ResumableSession* const>,
                                    absl::Span<const v1::StepEntry>, v1::StepResponse*,
                                    StepStream*);
  ResumableSession(Client* client, const v1::CompileRequest& compile,
                   const ResumeOptions& options)
      : client_(client), compile_(compile), options_(options) {}
  // Runs `attempt` until it returns something other than a loss (NOT_FOUND
  // for the session, UNAVAILABLE), re-creating the session before each retry,
  // within options_'s attempts and recovery time.
  template <typename F>
  absl::Status WithRecovery(const char* what, F attempt);
  // Creates a session at compile_ and replays tokens_ into it.
  absl::Status Recreate(absl::Time deadline);
  void PrepareContext(grpc::ClientContext* ctx, absl::Time deadline, bool recovering) const;
  // One Step entry on the live session; *lost set when it found the session
  // gone or the server unreachable. Commits tokens_ on success.
  absl::Status StepOnce(absl::Span<const uint32_t> tokens, uint32_t rollback,
                        uint32_t max_tokens_left,
                        uint32_t words_per_row, v1::StepResponse* resp, absl::Time deadline,
                        bool recovering, bool* lost);
  void Commit(uint32_t rollback, absl::Span<const uint32_t> tokens);

  Client* client_;
  v1::CompileRequest compile_;
  ResumeOptions options_;
  uint64_t session_id_ = 0;
  std::string index_id_;
  uint32_t words_per_row_ = 0;
  std::vector<uint32_t> tokens_;
  int resumes_ = 0;
  bool closed_ = false;
};

// A batched Step over resumable sessions: entries[i] (its session_id is
// ignored) steps sessions[i]. One Step call when all goes well; sessions
// found lost are resumed and their entries redone one by one, so each row and
// result is what an uninterrupted server would have returned. Entry errors
// are in resp->results(i).status() as for Client::Step; a non-OK return means
// the server did not come back in time (rows of unfinished entries are zero
// and their status says UNAVAILABLE), or a request-level error (e.g.
// RESOURCE_EXHAUSTED past --max-batch). All sessions must use one Client.
// With `stream`, the batched call goes over it (StepStream) instead of a
// unary Step; when the stream breaks, the entries are redone as above and
// stream->closed() tells the caller to open a new one.
absl::Status StepResumable(absl::Span<ResumableSession* const> sessions,
                           absl::Span<const v1::StepEntry> entries, v1::StepResponse* resp,
                           StepStream* stream = nullptr);

}  // namespace maskd

#endif  // MASKD_CLIENT_RESUMABLE_SESSION_H_
