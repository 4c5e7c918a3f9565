// The `layerfs` front: a small program that runs the CLI's command line in the daemon that holds
// the Store, so a command such as `layerfs commit` does not pay for loading the full CLI (RocksDB,
// libgit2, librados, libcurl, zstd, fmt, spdlog and their static initialisers: milliseconds per
// call). It links only the C and C++ runtimes and this library (docs/design.md, "A lean front").
//
// What it does, in order:
//  1. A mount(8) helper command line (`layerfs STORE:REF DIR -o ...`), or no Store found by the
//     CLI's own rules (ResolveStore), or no daemon listening on the Store's socket: it execs the
//     full CLI (kFullName beside it, ../libexec/layerfs/kFullName, or kFullName on PATH), which
//     behaves as before.
//  2. Else it sends one control-protocol request (docs/protocol.md, verb `cli`):
//       args: {"argv": [every argument, argv[0] included], "store_env": $LAYERFS_STORE or null,
//              "stderr_tty": whether its stderr is a terminal}
//     The daemon parses argv with the CLI's own parser (cli/command_line.h), finds the Store the
//     way the CLI would (ResolveStore, with the client's cwd and $LAYERFS_STORE) and, when that is
//     its own Store, runs the verb exactly as the full CLI forwarding it would, rendering the text
//     (or --json, help, usage errors, terminal progress) itself. Every byte the full CLI would
//     print comes back as an `output` event, {"fd": 1|2, "data_base64"}, in order; the final
//     result is {"exit_code": N}. The front writes the bytes and exits with N.
//  3. When the daemon cannot run the command line for the client (the verb runs in the client:
//     init, exec, mcp, or its CLI reads standard input; another Store; an older daemon that does
//     not know `cli`), it answers with an error before printing anything, and the front execs the
//     full CLI. So does a connection that ends before the first reply (a daemon that was exiting).
//
// The contract of the result: the same stdout, stderr and exit status as the full CLI for every
// command line (tests/cli/front_test.sh compares them). Stateless functions; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace layerfs::front {

constexpr const char* kFullName = "layerfs-full";
constexpr const char* kRequestVerb = "cli";
constexpr const char* kOutputEvent = "output";

// True for mount(8)'s helper form `layerfs STORE:REF DIR [-o OPTS]` (mount.fuse3 runs us so):
// args[1] is not an option and holds a ':' neither first nor last.
bool IsMountHelperForm(const std::vector<std::string>& args);

// The Store of the layerfs mount at or above `path`, from /proc/self/mountinfo; empty if none.
// `*mountpoint` gets that mount's mountpoint (empty if none).
std::string StoreOfMount(const std::string& path, std::string* mountpoint = nullptr);

// The Store a command line names, as `layerfs` finds it: `store_option` (--store), else
// `store_env` ($LAYERFS_STORE; may be null), else (not for init) the Store of the layerfs mount
// that holds the first argument after the verb that is not an option, else the one that holds
// `cwd`. Relative paths are against `cwd`; the result is real (symlinks resolved) when it exists,
// else absolute. Empty: none.
std::string ResolveStore(const std::string& store_option, const char* store_env, const std::vector<std::string>& args,
                         const std::string& cwd, bool init);

// Git's `-C DIR` before the verb (among `--store S` and other `-C`s): each changes the working
// directory, relative to the one before, and leaves `args`, so the command runs as if started in
// DIR. Empty on success; else why not (no such directory), with `args` as given.
std::string ChangeDirs(std::vector<std::string>* args);

// The --store value of a command line as the CLI's parser reads it before the verb (`--store S`
// or `--store=S`); empty if absent. The daemon checks it against its own parse.
std::string StoreOption(const std::vector<std::string>& args);

}  // namespace layerfs::front
