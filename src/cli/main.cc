#include <cstdio>
#include <cstdlib>

#include "cli/cli.h"

namespace layerfs::cli {

Result<std::unique_ptr<Store>> Context::OpenStore() {
  if (store_path.empty()) {
    if (const char* env = getenv("LAYERFS_STORE")) store_path = env;
  }
  if (store_path.empty()) return Status::Invalid("no store given: use --store PATH or set LAYERFS_STORE");
  return Store::Open(store_path);
}

std::string FormatTime(int64_t sec) {
  time_t t = sec;
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace layerfs::cli

int main(int argc, char** argv) {
  using namespace layerfs::cli;
  CLI::App app{"layerfs: a versioned filesystem for agent workspaces"};
  app.require_subcommand(1);
  Context ctx;
  app.add_option("--store", ctx.store_path, "Store directory (default: $LAYERFS_STORE)");
  AddStoreVerbs(app, ctx);
  AddHistoryVerbs(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "layerfs: %s\n", e.what());
    return 2;
  }
  if (!ctx.run) return 2;
  layerfs::Status s = ctx.run();
  if (!s.ok()) {
    std::fprintf(stderr, "layerfs: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
