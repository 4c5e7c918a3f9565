#include "codec/zstd_codec.h"

#define ZSTD_STATIC_LINKING_ONLY  // magicless frames (stable since zstd 1.3.x, still "experimental")
#include <zstd.h>

#include <algorithm>
#include <bit>

namespace layerfs::codec {
namespace {

struct Contexts {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ~Contexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};
Contexts& Ctx() {
  thread_local Contexts ctx;
  return ctx;
}

Status ZErr(size_t r, std::string_view what) {
  return Status::Errorf(EIO, "{}: {}", what, ZSTD_getErrorName(r));
}

int WindowLogFor(size_t bytes) {
  int log = std::bit_width(std::max<size_t>(bytes, 1024) - 1);
  return std::clamp(log, ZSTD_WINDOWLOG_MIN, 30);
}

Result<ZSTD_CCtx*> PrepareC(int level, size_t window_bytes) {
  ZSTD_CCtx* c = Ctx().c;
  ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
  size_t r;
  if (ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
      ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_format, ZSTD_f_zstd1_magicless)) ||
      ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
      ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)) ||
      ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0)) ||
      ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, WindowLogFor(window_bytes))))
    return ZErr(r, "zstd parameters");
  return c;
}

// `window_bytes`: what the writer sized the frame's window for (the decoded size, plus the base
// of a delta), so a crafted frame header cannot make the decoder allocate a larger window.
Result<ZSTD_DCtx*> PrepareD(size_t window_bytes) {
  ZSTD_DCtx* d = Ctx().d;
  ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
  size_t r;
  if (ZSTD_isError(r = ZSTD_DCtx_setParameter(d, ZSTD_d_format, ZSTD_f_zstd1_magicless)) ||
      ZSTD_isError(r = ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, WindowLogFor(window_bytes) + 1)))
    return ZErr(r, "zstd parameters");
  return d;
}

Result<std::string> RunC(ZSTD_CCtx* c, std::string_view src) {
  std::string out(ZSTD_compressBound(src.size()), '\0');
  size_t n = ZSTD_compress2(c, out.data(), out.size(), src.data(), src.size());
  if (ZSTD_isError(n)) return ZErr(n, "zstd compress");
  out.resize(n);
  return out;
}

// Decodes the whole frame, which must give exactly decoded_size bytes. The output grows with
// what the frame really yields (from a size the frame's own length suggests), so a record that
// declares a large size over a short frame costs little memory before it is found out.
Result<std::string> RunD(ZSTD_DCtx* d, std::string_view frame, size_t decoded_size) {
  std::string out(std::min(decoded_size, std::max<size_t>(256 << 10, frame.size() * 16)), '\0');
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  size_t pos = 0;
  for (;;) {
    ZSTD_outBuffer ob{out.data(), out.size(), pos};
    const size_t in_before = in.pos;
    size_t r = ZSTD_decompressStream(d, &ob, &in);
    if (ZSTD_isError(r)) return ZErr(r, "zstd decompress");
    const bool progress = ob.pos != pos || in.pos != in_before;
    pos = ob.pos;
    if (r == 0) break;  // the frame ended
    if (pos == out.size()) {
      if (out.size() == decoded_size) {
        // Full: the decoder may need one more call to see the frame end; any byte more is too long.
        char extra;
        ZSTD_outBuffer ob2{&extra, 1, 0};
        r = ZSTD_decompressStream(d, &ob2, &in);
        if (!ZSTD_isError(r) && r == 0 && ob2.pos == 0) break;
        return Status::Corrupt("zstd decompress: frame longer than its declared size");
      }
      out.resize(std::min(decoded_size, out.size() * 2));
    } else if (in.pos == in.size || !progress) {
      return Status::Corrupt("zstd decompress: truncated frame");
    }
  }
  if (pos != decoded_size || in.pos != frame.size())
    return Status::Corrupt("zstd decompress: size mismatch or trailing bytes");
  return out;
}

}  // namespace

Result<std::string> Compress(std::string_view src, int level) {
  LFS_ASSIGN(ZSTD_CCtx * c, PrepareC(level, src.size()));
  return RunC(c, src);
}

Result<std::string> Decompress(std::string_view frame, size_t decoded_size) {
  LFS_ASSIGN(ZSTD_DCtx * d, PrepareD(decoded_size));
  return RunD(d, frame, decoded_size);
}

Result<std::string> EncodeDelta(std::string_view base, std::string_view target, int level) {
  LFS_ASSIGN(ZSTD_CCtx * c, PrepareC(level, base.size() + target.size()));
  if (target.size() + base.size() > (64u << 20))
    (void)ZSTD_CCtx_setParameter(c, ZSTD_c_enableLongDistanceMatching, 1);
  size_t r = ZSTD_CCtx_refPrefix(c, base.data(), base.size());
  if (ZSTD_isError(r)) return ZErr(r, "zstd prefix");
  return RunC(c, target);
}

Result<std::string> DecodeDelta(std::string_view base, std::string_view delta, size_t decoded_size) {
  LFS_ASSIGN(ZSTD_DCtx * d, PrepareD(base.size() + decoded_size));
  size_t r = ZSTD_DCtx_refPrefix(d, base.data(), base.size());
  if (ZSTD_isError(r)) return ZErr(r, "zstd prefix");
  return RunD(d, delta, decoded_size);
}

}  // namespace layerfs::codec
