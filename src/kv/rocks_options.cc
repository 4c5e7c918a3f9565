// RocksKv's tuning: the options of each column family and of the database (docs/design.md,
// "Storage engine"; the reasons are in the comments where each value is set).
#include <cstdarg>

#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/table.h>

#include "kv/rocks_internal.h"

namespace layerfs::kv::rocks {

namespace {

class NullLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

// Batch::Patch on the workspace family: operands are EncodePatch() ranges applied in order over
// the existing value (absent = empty). FORMAT: the name is persisted with the family's options.
class PatchOperator : public rocksdb::MergeOperator {
 public:
  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    std::string v = in.existing_value ? in.existing_value->ToString() : std::string();
    for (const auto& op : in.operand_list) {
      if (!ApplyPatch(std::string_view(op.data(), op.size()), &v)) return false;  // Corruption
    }
    out->new_value = std::move(v);
    return true;
  }
  const char* Name() const override { return "layerfs.patch"; }
};

}  // namespace

rocksdb::ColumnFamilyOptions CfOptions(Cf cf, const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.format_version = 5;
  // XXH3 block checksums: this RocksDB build computes crc32c in software (10% of the daemon's
  // CPU in a profile of a sequential write). Each table records its checksum type, so tables
  // written before stay readable.
  t.checksum = rocksdb::kXXH3;
  bool history = cf == Cf::kBlobs || cf == Cf::kTrees || cf == Cf::kCommits || cf == Cf::kMeta || cf == Cf::kChunks;
  t.block_size = history ? 64 << 10 : 16 << 10;
  // The shared family (trees, commits, refs, the stat cache) in 1 MiB blocks: listings of one
  // tree's versions and of look-alike trees have much in common, but sit apart in id order, and
  // only a block covering much of the family finds it. Measured on 157 npm eslint releases (the
  // Store recompacted by gc; docs/design.md, "Storage engine"): trees 531 -> 430 kB and no
  // 112 KiB dictionary stored (too few blocks to train one), the Store 3.85 -> 3.75 MB; 128 KiB
  // to 512 KiB gave 3.81-3.85. The family is metadata, small beside the payload: a cold read
  // decompresses a block once and the block cache keeps it.
  if (cf == Cf::kMeta) t.block_size = 1 << 20;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  o.compression = rocksdb::kZSTD;
  o.compression_opts.level = history ? 9 : 3;
  if (history) {
    o.compression_opts.max_dict_bytes = 16 << 10;
    o.compression_opts.zstd_max_train_bytes = 4 << 20;
    // A table buffers this much before training its dictionary, then compresses the buffer in
    // one go that a shutdown cannot interrupt: at level 19, incompressible data compresses at
    // ~2.5 MB/s here, so 64 MiB held a daemon's exit for ~25 s. Training samples at most 16 MiB.
    o.compression_opts.max_dict_buffer_bytes = 8 << 20;
    o.bottommost_compression = rocksdb::kZSTD;
    o.bottommost_compression_opts = o.compression_opts;
    o.bottommost_compression_opts.level = 19;
    o.bottommost_compression_opts.enabled = true;
    // At the bottom (the bulk of a Store), a larger dictionary: measured on 157 npm eslint
    // releases (bench/dsh-dedup, the Store recompacted by gc), 16 KiB -> 4.50 MB, 64 KiB -> 4.29,
    // 112 KiB -> 4.24, 160 KiB -> 4.22, 256 KiB -> 4.24 (each table stores its dictionary).
    // Upper levels keep 16 KiB: their tables are small, and a dictionary may be as large as the
    // data it was trained on. Reads are unchanged (one dictionary per table, cached with it).
    o.bottommost_compression_opts.max_dict_bytes = 112 << 10;
    o.bottommost_compression_opts.zstd_max_train_bytes = 16 << 20;
  }
  if (cf == Cf::kChunks) {
    // Chunk records of large files: a final one is already our own zstd full or delta, or raw
    // because a sample showed it does not compress. RocksDB's level 9 and (at the bottom) 19
    // only cost CPU on those: committing a 256 MiB random file then writing into it kept two
    // cores busy for ~19 s, and the writes took 7x longer (docs/design.md, "Storage engine").
    // zstd level 1 without a dictionary instead: it gives up on incompressible blocks at a few
    // hundred MB/s, and still shrinks the raw pending records a commit writes (flushed before
    // the encoder replaces them, they stay until compacted away).
    o.compression = rocksdb::kZSTD;
    o.compression_opts = rocksdb::CompressionOptions();
    o.compression_opts.level = 1;
    o.bottommost_compression = rocksdb::kDisableCompressionOption;  // the same at the bottom
    o.bottommost_compression_opts = rocksdb::CompressionOptions();
    // Otherwise as the other history families (below).
  }
  if (cf == Cf::kWorkspace) {
    // Live file data: written often, folded into history and deleted at the next commit. Not
    // compressed (LZ4 cost the flushes, compactions and every cold read CPU for data that lives
    // until the next commit); compacted when the daemon closes the Store, so a closed Store keeps
    // no dead blocks (blob files were tried: dead ones outlived their data and inflated the Store).
    o.compression = rocksdb::kNoCompression;
    o.level_compaction_dynamic_level_bytes = true;
    o.write_buffer_size = 64 << 20;
    o.target_file_size_base = 64 << 20;
    // Small writes are patches (merges); a block patched this often in the memtable is folded
    // into one value there, so reads never apply long operand lists.
    o.merge_operator = std::make_shared<PatchOperator>();
    o.max_successive_merges = 32;
    return o;
  }
  o.compaction_style = rocksdb::kCompactionStyleUniversal;
  o.compaction_options_universal.allow_trivial_move = false;
  // The shared family (trees, commits, refs, the import stat cache) is small and rewritten in
  // part by every import (the branch's stat cache): RocksDB's default 200% let the dead versions
  // sit in its upper runs, 157 eslint releases imported one by one left a 4.48 MB Store (3.92
  // after gc's full compaction); at 25%, 4.04 MB. Full compactions of metadata cost little.
  if (cf == Cf::kMeta) o.compaction_options_universal.max_size_amplification_percent = 25;
  o.level0_file_num_compaction_trigger = 4;
  o.write_buffer_size = 64 << 20;
  o.target_file_size_base = 64 << 20;
  return o;
}

rocksdb::DBOptions DbOptions() {
  rocksdb::DBOptions dbo;
  dbo.create_missing_column_families = true;
  // One flush and up to three compactions: the workspace family's compaction at daemon exit
  // need not queue behind a long level-19 compaction of history (nor a flush behind either).
  dbo.max_background_jobs = 4;
  dbo.keep_log_file_num = 3;
  dbo.max_manifest_file_size = 4 << 20;
  dbo.recycle_log_file_num = 0;
  // Preallocation would count as allocated bytes the Store does not use.
  dbo.allow_fallocate = false;
  dbo.max_log_file_size = 1 << 20;
  dbo.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  // No info log: its files would count against the Store's allocated bytes, and this build of
  // RocksDB asserts when its info log hits a write error (a full disk).
  dbo.info_log = std::make_shared<NullLogger>();
  // Recovery replays the WAL into memtables and leaves the flush for later: an open then needs
  // only a new MANIFEST, OPTIONS file and WAL, so a Store reopens on a nearly full disk
  // (docs/design.md, "Full disks and damaged media").
  dbo.avoid_flush_during_recovery = true;
  return dbo;
}

}  // namespace layerfs::kv::rocks
