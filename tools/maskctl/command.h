// maskctl subcommands register themselves here; main() dispatches on argv[1]
// (after the global --addr/--tls_* flags, when present).
//
// A command has an offline form (no --addr: the core libraries in process),
// an online form (--addr: a running maskd), or both. Each form declares the
// flags its parser accepts and the usage line `maskctl help` prints; main()
// parses the command's arguments with the declared flags, so the usage and
// the parser are checked against each other (tests/tools/maskctl_args_test).
//
// Argument conventions shared by every command and form: a schema, grammar or
// structural tag is a FILE (a path, or "-" for standard input); a regex is the
// regex itself, inline (R), as users write regexes on the command line.
//
// Output contract shared by every subcommand: results are JSON objects, one
// per line, on stdout; errors are one line on stderr and exit status 2 (a
// subcommand may define other non-zero statuses, e.g. walk's 3).
#ifndef MASKD_TOOLS_MASKCTL_COMMAND_H_
#define MASKD_TOOLS_MASKCTL_COMMAND_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/maskctl/args.h"

namespace maskctl {

using FlagNames = std::set<std::string>;  // names without "--"

// The union of `sets`.
FlagNames Union(const std::vector<FlagNames>& sets);

// One form of a command: absent when `usage` is empty.
struct Form {
  // After "maskctl " (offline) or "maskctl --addr ADDR " (online): the
  // command's name, its flags and positional arguments.
  std::string usage;
  FlagNames value_flags, bool_flags;  // what Args::Parse accepts

  bool present() const { return !usage.empty(); }
};

struct Context {
  std::string addr;                // --addr, empty when not given (the offline form)
  std::string tls_ca;              // --tls_ca: PEM file; set: TLS to a TCP --addr
  std::string tls_cert, tls_key;   // --tls_cert/--tls_key: client certificate (mutual TLS)
  Args args;                       // the subcommand's own arguments, parsed by its form
  bool online() const { return !addr.empty(); }
};

using CommandFn = int (*)(const Context&);

struct CommandSpec {
  std::string name;
  std::string summary;  // one line: what the command does
  Form offline, online;
  CommandFn fn = nullptr;
};

struct CommandRegistrar {
  explicit CommandRegistrar(CommandSpec spec);
};

// Every registered command, by name.
const std::map<std::string, CommandSpec>& Commands();

// Runs `argv` (argv[0] excluded) as maskctl does; returns the exit status.
int RunMaskctl(const std::vector<std::string>& argv);

// Exit status for usage and runtime errors.
inline constexpr int kExitError = 2;

// Prints "maskctl <cmd>: <message>" to stderr and returns kExitError.
int Fail(const std::string& command, const std::string& message);

}  // namespace maskctl

// Registers a subcommand (a CommandSpec's fields, in order). Use once per
// subcommand, at file scope; `id` names the registrar.
#define MASKCTL_COMMAND(id, ...) \
  static ::maskctl::CommandRegistrar maskctl_registrar_##id(::maskctl::CommandSpec{__VA_ARGS__})

#endif  // MASKD_TOOLS_MASKCTL_COMMAND_H_
