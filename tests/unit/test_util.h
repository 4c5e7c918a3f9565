// Helpers shared by the unit tests: temporary directories, deterministic data, small file I/O.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

// LAYERFS_TEST_SANITIZED: built with AddressSanitizer or ThreadSanitizer (clang or gcc);
// LAYERFS_TEST_TSAN: with ThreadSanitizer.
#if defined(__SANITIZE_THREAD__)
#define LAYERFS_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LAYERFS_TEST_TSAN 1
#endif
#endif
#if defined(LAYERFS_TEST_TSAN) || defined(__SANITIZE_ADDRESS__)
#define LAYERFS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LAYERFS_TEST_SANITIZED 1
#endif
#endif

namespace layerfs::testing {

// Long model tests take fewer steps under a sanitizer, where each step costs several times more:
// what they check is the variety of the steps, which a third of them still covers.
#ifdef LAYERFS_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
// Under ThreadSanitizer, single-threaded parts of long tests have nothing to race.
#ifdef LAYERFS_TEST_TSAN
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "layerfs_test_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    // Make everything writable again so removal cannot fail on read-only dirs.
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) chmod(it->path().c_str(), 0700);
    }
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Deterministic pseudo-random bytes (splitmix64), so failures reproduce.
inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    s[i] = static_cast<char>(z ^ (z >> 31));
  }
  return s;
}

// Compressible but non-trivial text: numbered lines.
inline std::string TextBytes(size_t n, uint64_t seed) {
  std::string s;
  for (uint64_t i = 0; s.size() < n; i++) s += "line " + std::to_string(i * 7919 + seed) + " of some text\n";
  s.resize(n);
  return s;
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Sets a path's mtime (without following symlinks).
inline void SetMtime(const std::string& path, int64_t sec, long nsec) {
  timespec ts[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(sec), nsec}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// Pages of [off, off + len) of a file in the page cache (mincore); SIZE_MAX if it cannot tell.
inline size_t ResidentPages(const std::string& path, size_t off, size_t len) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SIZE_MAX;
  void* m = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(off));
  close(fd);
  if (m == MAP_FAILED) return SIZE_MAX;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + page - 1) / page);
  size_t n = SIZE_MAX;
  if (mincore(m, len, v.data()) == 0) {
    n = 0;
    for (unsigned char c : v) n += c & 1;
  }
  munmap(m, len);
  return n;
}

}  // namespace layerfs::testing
