#include "client/llama_sampler/maskd_llama_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd {
namespace {

// One sequence's constraint state. Invariants: `session` is 0 until the first
// Step needs it (created lazily, so that reset and clone before any use cost
// nothing); `unsent` holds the tokens accepted but not yet in a Step;
// `mask_valid` says `resp` holds the mask of the state after every accepted
// token (no Step in flight, nothing unsent); once `status` is not OK no Step
// is sent again until reset.
struct SamplerState {
  Client* client = nullptr;
  std::string index_id;
  LlamaSamplerOptions options;
  uint64_t session = 0;
  std::vector<uint32_t> unsent;
  uint32_t generated = 0;  // tokens accepted since the start (budget mode)
  v1::StepRequest req;
  v1::StepResponse resp;
  std::future<absl::Status> inflight;
  bool mask_valid = false;
  absl::Status status;
};

SamplerState* State(const llama_sampler* smpl) {
  return static_cast<SamplerState*>(smpl->ctx);
}

void Fail(SamplerState* st, absl::Status s) {
  if (st->status.ok()) st->status = std::move(s);
}

// Collects the Step in flight, if any: on success resp holds the next mask.
void Collect(SamplerState* st) {
  if (!st->inflight.valid()) return;
  absl::Status s = st->inflight.get();
  if (s.ok() && st->resp.results_size() == 1 && st->resp.results(0).status().code() != 0) {
    const auto& e = st->resp.results(0).status();
    s = absl::Status(static_cast<absl::StatusCode>(e.code()), e.message());
  }
  if (s.ok()) {
    st->mask_valid = true;
  } else {
    Fail(st, absl::Status(s.code(), absl::StrCat("maskd sampler: Step: ", s.message())));
  }
}

// Sends the unsent tokens (possibly none) in one Step, on another thread when
// `async`. Requires: nothing in flight.
void Send(SamplerState* st, bool async) {
  if (!st->status.ok()) return;
  if (st->session == 0) {
    auto created = st->client->CreateSession(st->index_id);
    if (!created.ok()) {
      Fail(st, absl::Status(created.status().code(),
                            absl::StrCat("maskd sampler: CreateSession: ",
                                         created.status().message())));
      return;
    }
    st->session = created->session_id();
  }
  v1::StepEntry* e = st->req.mutable_entries(0);
  e->set_session_id(st->session);
  e->clear_tokens();
  for (uint32_t t : st->unsent) e->add_tokens(t);
  st->generated += st->unsent.size();
  st->unsent.clear();
  if (st->options.max_tokens > 0) {
    // Tokens still allowed after these, the next one and the EOS included.
    uint32_t used = std::min(st->generated, st->options.max_tokens - 1);
    e->set_max_tokens_left(st->options.max_tokens - used);
  }
  st->mask_valid = false;
  Client* client = st->client;
  auto step = [client, st] { return client->Step(st->req, &st->resp); };
  st->inflight = async ? std::async(std::launch::async, step)
                       : std::async(std::launch::deferred, step);
}

// Only the EOS ids stay: what apply leaves once the sampler has failed.
void AllowOnlyEos(const SamplerState* st, llama_token_data_array* cur_p) {
  const auto& eos = st->options.eos_ids;
  for (size_t i = 0; i < cur_p->size; ++i) {
    if (std::find(eos.begin(), eos.end(), cur_p->data[i].id) == eos.end()) {
      cur_p->data[i].logit = -INFINITY;
    }
  }
  cur_p->sorted = false;
}

const char* Name(const llama_sampler*) { return "maskd"; }

void Accept(llama_sampler* smpl, llama_token token) {
  SamplerState* st = State(smpl);
  Collect(st);
  if (!st->status.ok()) return;
  st->unsent.push_back(static_cast<uint32_t>(token));
  st->mask_valid = false;
  if (st->options.prefetch) Send(st, /*async=*/true);
}

void Apply(llama_sampler* smpl, llama_token_data_array* cur_p) {
  SamplerState* st = State(smpl);
  Collect(st);
  if (st->status.ok() && !st->mask_valid) {
    Send(st, /*async=*/false);
    Collect(st);
  }
  if (!st->status.ok()) {
    AllowOnlyEos(st, cur_p);
    return;
  }
  MaskCandidates(MaskRow(st->resp, 0), cur_p);
}

void CloseSession(SamplerState* st) {
  if (st->inflight.valid()) st->inflight.wait();
  st->inflight = {};
  if (st->session != 0) (void)st->client->CloseSession(st->session);  // best effort
  st->session = 0;
}

void Reset(llama_sampler* smpl) {
  SamplerState* st = State(smpl);
  CloseSession(st);
  st->unsent.clear();
  st->generated = 0;
  st->mask_valid = false;
  st->status = absl::OkStatus();
}

llama_sampler_i* Iface();

llama_sampler* Clone(const llama_sampler* smpl) {
  SamplerState* st = State(smpl);  // collecting the Step in flight changes no visible state
  Collect(st);
  auto copy = std::make_unique<SamplerState>();
  copy->client = st->client;
  copy->index_id = st->index_id;
  copy->options = st->options;
  copy->unsent = st->unsent;
  copy->generated = st->generated;
  copy->req = st->req;
  copy->resp = st->resp;
  copy->mask_valid = st->mask_valid;
  copy->status = st->status;
  if (st->session != 0 && copy->status.ok()) {
    auto forked = st->client->ForkSession(st->session);
    if (forked.ok()) {
      copy->session = *forked;
    } else {
      Fail(copy.get(), absl::Status(forked.status().code(),
                                    absl::StrCat("maskd sampler: ForkSession: ",
                                                 forked.status().message())));
    }
  }
  return llama_sampler_init(Iface(), copy.release());
}

void Free(llama_sampler* smpl) {
  SamplerState* st = State(smpl);
  CloseSession(st);
  delete st;
}

llama_sampler_i* Iface() {
  // Assigned by name: newer llama.cpp versions add members (backend
  // sampling), which stay null here.
  static llama_sampler_i iface = [] {
    llama_sampler_i i;
    std::memset(&i, 0, sizeof i);
    i.name = Name;
    i.accept = Accept;
    i.apply = Apply;
    i.reset = Reset;
    i.clone = Clone;
    i.free = Free;
    return i;
  }();
  return &iface;
}

absl::StatusOr<std::vector<llama_token>> TokenizerEos(Client* client, const std::string& name) {
  auto list = client->ListTokenizers();
  if (!list.ok()) return list.status();
  for (const v1::Tokenizer& t : *list) {
    if (t.name() == name) return std::vector<llama_token>(t.eos_ids().begin(), t.eos_ids().end());
  }
  return absl::NotFoundError(absl::StrCat("maskd has no tokenizer '", name, "'"));
}

}  // namespace

size_t MaskCandidates(absl::Span<const uint32_t> row, llama_token_data_array* cur_p) {
  size_t masked = 0;
  for (size_t i = 0; i < cur_p->size; ++i) {
    llama_token_data& d = cur_p->data[i];
    if (d.id < 0 || !Allowed(row, static_cast<uint32_t>(d.id))) {
      d.logit = -INFINITY;
      ++masked;
    }
  }
  if (masked > 0 && cur_p->sorted) {
    // Sorted by decreasing logit: the masked entries go last, the rest keep
    // their order, so the array is still sorted. `selected` follows its entry.
    llama_token_data* data = cur_p->data;
    llama_token sel = cur_p->selected >= 0 ? data[cur_p->selected].id : -1;
    std::stable_partition(data, data + cur_p->size,
                          [](const llama_token_data& d) { return d.logit != -INFINITY; });
    if (cur_p->selected >= 0) {
      for (size_t i = 0; i < cur_p->size; ++i) {
        if (data[i].id == sel) cur_p->selected = static_cast<int64_t>(i);
      }
    }
  }
  return masked;
}

absl::StatusOr<llama_sampler*> NewLlamaSampler(Client* client, const v1::CompileRequest& compile,
                                               const LlamaSamplerOptions& options) {
  v1::CompileRequest req = compile;
  req.set_wait(true);
  auto compiled = client->Compile(req);
  if (!compiled.ok()) return compiled.status();
  auto st = std::make_unique<SamplerState>();
  st->client = client;
  st->index_id = compiled->index_id();
  st->options = options;
  if (st->options.eos_ids.empty()) {
    auto eos = TokenizerEos(client, compile.tokenizer());
    if (!eos.ok()) return eos.status();
    st->options.eos_ids = *std::move(eos);
  }
  st->req.add_entries();
  return llama_sampler_init(Iface(), st.release());
}

bool IsMaskdLlamaSampler(const llama_sampler* smpl) {
  return smpl != nullptr && smpl->iface == Iface();
}

absl::Status LlamaSamplerStatus(const llama_sampler* smpl) {
  if (IsMaskdLlamaSampler(smpl)) return State(smpl)->status;
  if (smpl != nullptr && std::strcmp(llama_sampler_name(smpl), "chain") == 0) {
    auto* chain = const_cast<llama_sampler*>(smpl);
    for (int32_t i = 0; i < llama_sampler_chain_n(chain); ++i) {
      const llama_sampler* s = llama_sampler_chain_get(chain, i);
      if (IsMaskdLlamaSampler(s)) return State(s)->status;
    }
  }
  return absl::NotFoundError("no maskd sampler");
}

}  // namespace maskd
