// Status and Result<T>: how every LayerFS call reports failure.
//
// A Status is an errno-style code plus a one-line message; it costs one pointer-sized check on
// success. The code is a POSIX errno (ENOENT, EIO, ENOSPC, ...) so the FUSE adapter and the CLI map
// failures the same way. The core never throws; Result<T> carries either a value or a Status.
// Both are [[nodiscard]]: ignoring a failure is a compile error under -Werror.
#pragma once

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace layerfs {

// LayerFS's own failure codes, beyond errno, for outcomes a program must tell apart (the control
// protocol names them; docs/protocol.md). They never reach the kernel: ToErrno() maps them to EIO.
// FORMAT (protocol): never renumber.
constexpr int kNotFastForward = 0x10001;  // a push or pull that is not a fast-forward
constexpr int kConflict = 0x10002;        // a merge stopped on conflicts
constexpr int kDiverged = 0x10003;        // a remote's history or id key does not match the Store's
constexpr int kTooLarge = 0x10004;        // a message or result over the control protocol's size limit
constexpr int kProtocol = 0x10005;        // a control message that is not a request, or a version mismatch

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(int code, std::string msg) { return Status(code, std::move(msg)); }
  template <typename... Args>
  static Status Errorf(int code, fmt::format_string<Args...> f, Args&&... args) {
    return Status(code, fmt::format(f, std::forward<Args>(args)...));
  }
  static Status NotFound(std::string msg) { return Status(ENOENT, std::move(msg)); }
  static Status Corrupt(std::string msg) { return Status(EIO, std::move(msg)); }
  static Status Invalid(std::string msg) { return Status(EINVAL, std::move(msg)); }
  static Status Exists(std::string msg) { return Status(EEXIST, std::move(msg)); }

  bool ok() const { return rep_ == nullptr; }
  // errno-style code (or one of the LayerFS codes above); 0 when ok().
  int code() const { return rep_ ? rep_->code : 0; }
  // A POSIX errno for the code: LayerFS's own codes (and anything not positive) become EIO.
  int ToErrno() const { return code() > 0 && code() < 0x10000 ? code() : (ok() ? 0 : EIO); }
  // The code's stable name: "ENOENT", "NOT_FAST_FORWARD", ... ("OK" when ok()).
  std::string CodeName() const;
  const std::string& message() const;
  // The message with a context prefix: "ctx: message".
  Status Context(std::string_view ctx) const;
  std::string ToString() const { return ok() ? "ok" : message(); }

 private:
  struct Rep {
    int code;
    std::string msg;
  };
  Status(int code, std::string msg) : rep_(std::make_shared<Rep>(Rep{code, std::move(msg)})) {}
  std::shared_ptr<const Rep> rep_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {}     // NOLINT: implicit by design; REQUIRES: !s.ok()
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T value_or(T fallback) const { return ok() ? std::get<T>(v_) : fallback; }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace layerfs

// Early-return helpers. LFS_TRY(expr) returns the Status of a failed Status expression;
// LFS_ASSIGN(lhs, expr) unwraps a Result or returns its Status.
#define LFS_CONCAT_INNER(a, b) a##b
#define LFS_CONCAT(a, b) LFS_CONCAT_INNER(a, b)
#define LFS_TRY(expr)                         \
  do {                                        \
    ::layerfs::Status lfs_s_ = (expr);        \
    if (!lfs_s_.ok()) return lfs_s_;          \
  } while (0)
#define LFS_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                    \
  if (!tmp.ok()) return tmp.status();   \
  lhs = std::move(tmp).value()
#define LFS_ASSIGN(lhs, expr) LFS_ASSIGN_IMPL(LFS_CONCAT(lfs_r_, __LINE__), lhs, expr)
