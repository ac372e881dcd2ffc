#include "tools/maskctl/command.h"

#include <cstdio>
#include <iostream>
#include <utility>

#include "tools/maskctl/constraint_flags.h"

namespace maskctl {
namespace {

std::map<std::string, CommandSpec>& Registry() {
  static auto* registry = new std::map<std::string, CommandSpec>();
  return *registry;
}

void PrintUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: maskctl [--addr ADDR [--tls_ca F [--tls_cert F --tls_key F]]] <command> [args]\n"
               "\n"
               "CONSTRAINT: %s\n"
               "FILE: a file's path, or - for standard input. R: the regex itself, inline (quote it for\n"
               "the shell). PATH: a tokenizer.json[.gz] or a folder holding one; NAME: a tokenizer the\n"
               "server loaded. The same flag means the same with and without --addr.\n"
               "\n"
               "commands (offline: in this process; with --addr: against a running maskd):\n",
               kConstraintUsage);
  for (const auto& [name, spec] : Registry()) {
    if (spec.offline.present()) std::fprintf(out, "  maskctl %s\n", spec.offline.usage.c_str());
    if (spec.online.present()) {
      std::fprintf(out, "  maskctl --addr ADDR %s\n", spec.online.usage.c_str());
    }
    std::fprintf(out, "      %s\n", spec.summary.c_str());
  }
}

// Reads the global flags at argv[*i...] into `ctx`; false (after printing
// why) on a bad one. Stops at the first argument that is none of them.
bool ParseGlobalFlags(const std::vector<std::string>& argv, size_t* i, Context* ctx) {
  for (; *i < argv.size(); ++*i) {
    const std::string& a = argv[*i];
    if (a == "--addr" && *i + 1 < argv.size()) {
      ctx->addr = argv[++*i];
    } else if (a.rfind("--addr=", 0) == 0) {
      ctx->addr = a.substr(7);
    } else if (a.rfind("--tls_", 0) == 0 || a.rfind("--tls-", 0) == 0) {
      // --tls_ca FILE, --tls_cert FILE, --tls_key FILE (or --tls-ca=FILE ...)
      std::string name = a.substr(6), value;
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (*i + 1 < argv.size()) {
        value = argv[++*i];
      }
      if (value.empty()) {  // a TLS flag without its file must not fall back to plaintext
        std::fprintf(stderr, "maskctl: %s needs a file\n", a.c_str());
        return false;
      }
      std::string* field = name == "ca" ? &ctx->tls_ca : name == "cert" ? &ctx->tls_cert
                           : name == "key" ? &ctx->tls_key : nullptr;
      if (field == nullptr) {
        std::fprintf(stderr, "maskctl: unknown flag '%s'\n", a.c_str());
        return false;
      }
      *field = value;
    } else {
      return true;
    }
  }
  return true;
}

}  // namespace

FlagNames Union(const std::vector<FlagNames>& sets) {
  FlagNames out;
  for (const FlagNames& s : sets) out.insert(s.begin(), s.end());
  return out;
}

CommandRegistrar::CommandRegistrar(CommandSpec spec) {
  std::string name = spec.name;
  Registry()[name] = std::move(spec);
}

const std::map<std::string, CommandSpec>& Commands() { return Registry(); }

int Fail(const std::string& command, const std::string& message) {
  std::cerr << "maskctl " << command << ": " << message << std::endl;
  return kExitError;
}

int RunMaskctl(const std::vector<std::string>& argv) {
  Context ctx;
  size_t i = 0;
  if (!ParseGlobalFlags(argv, &i, &ctx)) return kExitError;
  if (i >= argv.size() || argv[i] == "help" || argv[i] == "--help") {
    PrintUsage(i >= argv.size() ? stderr : stdout);
    return i >= argv.size() ? kExitError : 0;
  }
  const std::string& name = argv[i++];
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    std::fprintf(stderr, "maskctl: unknown command '%s' (see maskctl help)\n", name.c_str());
    return kExitError;
  }
  const CommandSpec& spec = it->second;
  const Form& form = ctx.online() ? spec.online : spec.offline;
  if (!form.present()) {
    return Fail(name, ctx.online() ? "runs offline only: drop --addr"
                                   : "needs --addr ADDR (e.g. unix:///tmp/maskd.sock)");
  }
  auto args = Args::Parse({argv.begin() + static_cast<std::ptrdiff_t>(i), argv.end()},
                          form.value_flags, form.bool_flags);
  if (!args.ok()) return Fail(name, std::string(args.status().message()));
  ctx.args = *std::move(args);
  return spec.fn(ctx);
}

}  // namespace maskctl
