// layerfs_transport_bench URL [SMALL_OPS] [LARGE_OPS]: per-request latency and throughput of one
// remote transport, one line per figure ("name<TAB>value<TAB>unit"), for bench/remote/transports.
//   put_4k, get_4k, put_if_absent_4k, cas_cycle (GetRef + CasRef), size, list_N: median and mean
//   microseconds of SMALL_OPS sequential calls from one thread;
//   put_16m, get_16m: MB/s of LARGE_OPS sequential 16 MiB blobs;
//   ranges_64k: MB/s of one ReadRanges of 256 reads of 64 KiB spread over those blobs.
// Writes only under a fresh bench-XXXX/ prefix of the remote and deletes it at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "remote/transport.h"

using layerfs::remote::RangeRead;
using layerfs::remote::Transport;
using Clock = std::chrono::steady_clock;

namespace {

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    memcpy(&s[i], &v, 8);
  }
  return s;
}

void Die(const layerfs::Status& s) {
  fprintf(stderr, "layerfs_transport_bench: %s\n", s.message().c_str());
  exit(1);
}

double Micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

void Report(const char* name, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  printf("%s_median\t%.0f\tus\n%s_mean\t%.0f\tus\n", name, us[us.size() / 2], name, sum / us.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: layerfs_transport_bench URL [SMALL_OPS] [LARGE_OPS]\n");
    return 2;
  }
  int small = argc > 2 ? atoi(argv[2]) : 200, large = argc > 3 ? atoi(argv[3]) : 8;
  auto opened = layerfs::remote::OpenTransport(argv[1]);
  if (!opened.ok()) Die(opened.status());
  Transport& t = **opened;
  std::string dir = fmt::format("bench-{:08x}/", std::random_device{}());
  std::string blob4k = Bytes(4096, 1);
  std::vector<double> us;

  for (int i = 0; i < small; i++) {
    auto a = Clock::now();
    if (auto s = t.Put(fmt::format("{}small/{:05}", dir, i), blob4k); !s.ok()) Die(s);
    us.push_back(Micros(a, Clock::now()));
  }
  Report("put_4k", us);
  us.clear();
  for (int i = 0; i < small; i++) {
    auto a = Clock::now();
    auto r = t.Get(fmt::format("{}small/{:05}", dir, i));
    if (!r.ok()) Die(r.status());
    if (*r != blob4k) Die(layerfs::Status::Corrupt("read back different bytes"));
    us.push_back(Micros(a, Clock::now()));
  }
  Report("get_4k", us);
  us.clear();
  for (int i = 0; i < small; i++) {
    auto a = Clock::now();
    if (auto s = t.PutIfAbsent(fmt::format("{}once/{:05}", dir, i), blob4k); !s.ok()) Die(s);
    us.push_back(Micros(a, Clock::now()));
  }
  Report("put_if_absent_4k", us);
  us.clear();
  for (int i = 0; i < small; i++) {
    auto a = Clock::now();
    auto r = t.Size(fmt::format("{}small/{:05}", dir, i));
    if (!r.ok()) Die(r.status());
    us.push_back(Micros(a, Clock::now()));
  }
  Report("size", us);
  us.clear();
  std::string ref = dir + "refs/heads/main";
  for (int i = 0; i < small; i++) {
    auto a = Clock::now();
    auto cur = t.GetRef(ref);
    if (!cur.ok()) Die(cur.status());
    std::optional<std::string> tok;
    if (cur->has_value()) tok = (*cur)->token;
    auto r = t.CasRef(ref, fmt::format("{:040x}", i), tok);
    if (!r.ok()) Die(r.status());
    us.push_back(Micros(a, Clock::now()));
  }
  Report("cas_cycle", us);
  {
    auto a = Clock::now();
    auto l = t.List(dir + "small/");
    if (!l.ok()) Die(l.status());
    printf("list_%d\t%.0f\tus\n", small, Micros(a, Clock::now()));
  }

  std::string big = Bytes(16 << 20, 2);
  auto a = Clock::now();
  for (int i = 0; i < large; i++)
    if (auto s = t.Put(fmt::format("{}large/{:03}", dir, i), big); !s.ok()) Die(s);
  double secs = Micros(a, Clock::now()) / 1e6;
  printf("put_16m\t%.0f\tMB/s\n", large * 16.777216 / secs);
  a = Clock::now();
  for (int i = 0; i < large; i++) {
    auto r = t.Get(fmt::format("{}large/{:03}", dir, i));
    if (!r.ok()) Die(r.status());
    if (r->size() != big.size()) Die(layerfs::Status::Corrupt("short read"));
  }
  secs = Micros(a, Clock::now()) / 1e6;
  printf("get_16m\t%.0f\tMB/s\n", large * 16.777216 / secs);
  std::vector<RangeRead> reads(256);
  std::mt19937_64 rng(3);
  for (auto& r : reads) {
    r.key = fmt::format("{}large/{:03}", dir, rng() % large);
    r.offset = rng() % ((16 << 20) - 65536);
    r.length = 65536;
  }
  a = Clock::now();
  if (auto s = t.ReadRanges(&reads); !s.ok()) Die(s);
  secs = Micros(a, Clock::now()) / 1e6;
  printf("ranges_64k\t%.0f\tMB/s\n", reads.size() * 0.065536 / secs);
  printf("ranges_64k_call\t%.0f\tus\n", secs * 1e6);

  auto keys = t.List(dir);
  if (!keys.ok()) Die(keys.status());
  for (const auto& k : *keys)
    if (auto s = t.Delete(k); !s.ok()) Die(s);
  return 0;
}
