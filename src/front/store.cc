// Finding the Store of a command line, shared by the front and the full CLI (front.h).
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "front/front.h"

namespace layerfs::front {

bool IsMountHelperForm(const std::vector<std::string>& args) {
  if (args.size() < 3 || args[1].empty() || args[1][0] == '-') return false;
  const size_t colon = args[1].rfind(':');
  return colon != std::string::npos && colon != 0 && colon + 1 != args[1].size();
}

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 3 < s.size() + 0 && isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string Abs(const std::string& path, const std::string& cwd) {
  if (path.empty() || path[0] == '/') return path;
  return cwd + "/" + path;
}

}  // namespace

std::string StoreOfMount(const std::string& path, std::string* mountpoint) {
  if (mountpoint) mountpoint->clear();
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real)) return "";
  std::string p = real;
  std::ifstream in("/proc/self/mountinfo");
  std::string line, best_store, best_mp;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 2 >= f.end()) continue;
    std::string mp = Unescape(f[4]), type = *(dash + 1), source = Unescape(*(dash + 2));
    if (type != "fuse.layerfs" || source.rfind("layerfs:", 0) != 0) continue;
    bool under = p == mp || (p.size() > mp.size() && p.compare(0, mp.size(), mp) == 0 && (mp == "/" || p[mp.size()] == '/'));
    if (under && mp.size() >= best_mp.size()) {
      best_mp = mp;
      best_store = source.substr(8);
    }
  }
  if (mountpoint) *mountpoint = best_mp;
  return best_store;
}

std::string ResolveStore(const std::string& store_option, const char* store_env, const std::vector<std::string>& args,
                         const std::string& cwd, bool init) {
  std::string store = store_option;
  if (store.empty() && store_env) store = store_env;
  if (store.empty() && !init) {
    // A verb on a mount finds its Store from the mount.
    for (size_t i = 2; i < args.size() && store.empty(); i++)
      if (!args[i].empty() && args[i][0] != '-') store = StoreOfMount(Abs(args[i], cwd));
    if (store.empty()) store = StoreOfMount(cwd);
  }
  if (!store.empty()) {
    char real[PATH_MAX];
    if (realpath(Abs(store, cwd).c_str(), real)) store = real;
    else store = Abs(store, cwd);
  }
  return store;
}

std::string StoreOption(const std::vector<std::string>& args) {
  std::string store;
  for (size_t i = 1; i < args.size(); i++) {
    if (args[i] == "--store" && i + 1 < args.size()) {
      store = args[++i];
    } else if (args[i].rfind("--store=", 0) == 0) {
      store = args[i].substr(8);
    } else if (args[i].empty() || args[i][0] != '-') {
      break;  // the verb
    }
  }
  return store;
}

std::string ChangeDirs(std::vector<std::string>* args) {
  std::vector<std::string>& a = *args;
  for (size_t i = 1; i < a.size();) {
    if (a[i] == "--store") {
      i += 2;
    } else if (a[i] == "-C" && i + 1 < a.size()) {
      if (chdir(a[i + 1].c_str()) != 0)
        return "cannot change to '" + a[i + 1] + "': " + strerror(errno);
      a.erase(a.begin() + static_cast<long>(i), a.begin() + static_cast<long>(i) + 2);
    } else if (a[i].empty() || a[i][0] != '-') {
      break;  // the verb
    } else {
      i++;
    }
  }
  return "";
}

}  // namespace layerfs::front
