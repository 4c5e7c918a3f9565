// Store::Import: commits a directory tree as the next Commit of a branch.
//
// Walks DIR with *at() calls (never following symlinks), beside the branch head's tree, so each
// path's previous version is its delta base. A stat cache (size, mtime, ctime, inode, device per
// branch and path, like Git's index) skips reading and hashing unchanged files. Objects are staged
// in the ObjectStore; the Commit, the ref and the new stat cache go in one synced batch.
//
// Every core works (ImportOptions::threads): the walk (one thread, in sorted order, so link
// groups and errors come out the same every time) hands each file whose content must be read to
// a pool of workers that hash, delta-encode and stage it (ObjectStore is thread-safe; a file's
// delta base is its previous version, fixed before it is queued, so the records are the ones a
// single thread writes). Trees are built once the walk and the workers are done, bottom up.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/coding.h"
#include "history/file_content.h"
#include "history/similar_files.h"
#include "history/keys.h"
#include "history/store_impl.h"
#include "kv/kv.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs {

using objects::Kind;

namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

struct StatEntry {
  uint64_t size, mtime_ns, ctime_ns, ino, dev;
  bool chunked;
  ObjectId id;
};

std::string EncodeStat(const StatEntry& s) {
  std::string v;
  base::PutVarint(&v, s.size);
  base::PutVarint(&v, s.mtime_ns);
  base::PutVarint(&v, s.ctime_ns);
  base::PutVarint(&v, s.ino);
  base::PutVarint(&v, s.dev);
  base::PutU8(&v, s.chunked);
  v.append(s.id.AsKey());
  return v;
}

bool DecodeStat(std::string_view v, StatEntry* s) {
  base::Reader r(v);
  uint8_t ch;
  std::string_view id;
  if (!r.Varint(&s->size) || !r.Varint(&s->mtime_ns) || !r.Varint(&s->ctime_ns) || !r.Varint(&s->ino) ||
      !r.Varint(&s->dev) || !r.U8(&ch) || !r.Raw(ObjectId::kSize, &id) || !r.AtEnd())
    return false;
  s->chunked = ch;
  s->id = ObjectId::FromKey(id);
  return true;
}

uint64_t Nanos(const timespec& t) { return t.tv_sec * 1000000000ull + t.tv_nsec; }

Status Errno(std::string_view what, const std::string& path) {
  int e = errno;
  return Status::Errorf(e, "{} {}: {}", what, path, strerror(e));
}

Status ReadXattrs(const std::string& path, std::vector<std::pair<std::string, std::string>>* out) {
  ssize_t n = llistxattr(path.c_str(), nullptr, 0);
  if (n < 0) return (errno == ENOTSUP || errno == ENODATA) ? Status::Ok() : Errno("list xattrs of", path);
  if (n == 0) return Status::Ok();
  std::string names(n, '\0');
  n = llistxattr(path.c_str(), names.data(), names.size());
  if (n < 0) return Errno("list xattrs of", path);
  names.resize(n);
  for (size_t pos = 0; pos < names.size();) {
    std::string name = names.c_str() + pos;
    pos += name.size() + 1;
    if (name.rfind("user.", 0) != 0) continue;
    ssize_t vn = lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (vn < 0) return Errno("read xattr of", path);
    std::string v(vn, '\0');
    vn = lgetxattr(path.c_str(), name.c_str(), v.data(), v.size());
    if (vn < 0) return Errno("read xattr of", path);
    v.resize(vn);
    out->emplace_back(std::move(name), std::move(v));
  }
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

// A file whose content a worker reads and stores. The walk fills the inputs; the worker the
// results, which are read once every worker is done.
struct FileJob {
  std::shared_ptr<Fd> dir;  // its directory, open until the job has run
  std::string name, abs;
  uint64_t size = 0;
  std::optional<TreeEntry> base;  // the delta base (previous version or a similar file)
  FileJob* base_job = nullptr;    // ... or the file of an earlier job (waited for)
  uint32_t hops = 0;              // jobs between this one and a base stored before the import
  std::atomic<bool> done{false};
  Status status;
  bool cancelled = false;  // not run: another job had failed (its error is the one to report)
  ObjectId id;
  bool chunked = false;
  uint64_t objects_added = 0, bytes_added = 0;
};

// Runs jobs on `threads` workers (0 or 1: on the caller, at once). Submit blocks while a few
// jobs per worker are queued, so the walk never runs far ahead (each queued job holds its
// directory open).
class Pool {
 public:
  Pool(unsigned threads, std::function<void(FileJob&)> run) : run_(std::move(run)) {
    if (threads <= 1) return;
    for (unsigned i = 0; i < threads; i++) workers_.emplace_back([this] { Work(); });
  }
  ~Pool() { Wait(); }
  void Submit(FileJob* job) {
    if (workers_.empty()) {
      run_(*job);
      return;
    }
    std::unique_lock l(mu_);
    space_.wait(l, [&] { return queue_.size() < 4 * workers_.size(); });
    queue_.push_back(job);
    ready_.notify_one();
  }
  // Runs what is queued and stops the workers.
  void Wait() {
    {
      std::lock_guard l(mu_);
      closing_ = true;
    }
    ready_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

 private:
  void Work() {
    for (;;) {
      FileJob* job;
      {
        std::unique_lock l(mu_);
        ready_.wait(l, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = queue_.front();
        queue_.pop_front();
      }
      space_.notify_one();
      run_(*job);
    }
  }

  std::function<void(FileJob&)> run_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<FileJob*> queue_;
  bool closing_ = false;
};

// A directory as walked: its entries, in order, with what each still waits for.
struct DirNode {
  std::vector<TreeEntry> entries;
  std::vector<FileJob*> jobs;                    // per entry: the job storing it, or null
  std::vector<std::unique_ptr<DirNode>> subdirs;  // per entry: the directory, or null
  std::vector<std::string> rels;                  // per entry: the path, for the stat cache
  std::vector<std::optional<StatEntry>> stats;    // per entry: to cache once the id is known
  std::optional<ObjectId> old;                    // the directory's previous tree
};

class Importer {
 public:
  Importer(Store& st, const ImportOptions& opts, ImportStats& stats)
      : st_(st), os_(st.objects()), opts_(opts), stats_(stats), start_ns_(history::NowNanos()),
        pool_(opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency()),
              [this](FileJob& j) { RunJob(j); }) {}

  // Imports the directory open at `root` (path `abs`) beside the previous root tree `old`.
  Result<ObjectId> Run(int root, const std::string& abs, const std::optional<ObjectId>& old) {
    auto dup_fd = std::make_shared<Fd>(dup(root));
    if (dup_fd->fd < 0) return Errno("open", abs);
    DirNode top;
    Status walked = Dir(dup_fd, abs, "", old, &top);
    dup_fd.reset();
    pool_.Wait();
    LFS_TRY(walked);
    // The failure that stopped the import, not a job it cancelled: jobs ahead of it in walk
    // order may have been taken after it failed.
    const FileJob* cancelled = nullptr;
    for (auto& j : jobs_) {
      if (j.cancelled) {
        if (!cancelled) cancelled = &j;
        continue;
      }
      if (!j.status.ok()) return j.status;
      Count(j.objects_added, j.bytes_added);
    }
    if (cancelled) return cancelled->status;
    return Build(top);
  }

  Status LoadStatCache() {
    if (!opts_.use_stat_cache) return Status::Ok();
    std::string p = history::StatBranchPrefix(opts_.branch);
    return st_.kv().Scan(kv::Cf::kIndex, p, history::PrefixEnd(p), [&](auto k, auto v) {
      StatEntry s;
      if (DecodeStat(v, &s)) cache_.emplace(std::string(k.substr(p.size())), s);
      return true;
    });
  }

  // Walks the directory open at `dir` (path `abs`, relative path `rel`), beside its previous
  // tree `old` (if any), into `node`, queueing the files to read.
  Status Dir(const std::shared_ptr<Fd>& dir, const std::string& abs, const std::string& rel,
             const std::optional<ObjectId>& old, DirNode* node) {
    if (failed_.load()) return Status::Ok();  // a worker failed: Run reports it
    const int dirfd = dir->fd;
    node->old = old;
    if (!rel.empty() && static_cast<size_t>(std::count(rel.begin(), rel.end(), '/')) + 1 > objects::kMaxTreeDepth)
      return Status::Errorf(ELOOP, "{}: directories nested deeper than {} cannot be imported", abs,
                            objects::kMaxTreeDepth);
    stats_.dirs++;
    std::vector<TreeEntry> old_entries;
    if (old) {
      LFS_ASSIGN(old_entries, st_.ReadTree(*old));
    }
    auto find_old = [&](const std::string& name) -> const TreeEntry* {
      auto it = std::lower_bound(old_entries.begin(), old_entries.end(), name,
                                 [](const TreeEntry& e, const std::string& n) { return e.name < n; });
      return it != old_entries.end() && it->name == name ? &*it : nullptr;
    };
    std::vector<std::string> names;
    {
      int dup_fd = dup(dirfd);
      if (dup_fd < 0) return Errno("open", abs);
      DIR* d = fdopendir(dup_fd);
      if (!d) {
        close(dup_fd);
        return Errno("open", abs);
      }
      errno = 0;
      while (dirent* e = readdir(d)) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        names.emplace_back(e->d_name);
      }
      int err = errno;
      closedir(d);
      if (err) {
        errno = err;
        return Errno("read directory", abs);
      }
    }
    std::sort(names.begin(), names.end());
    const uint64_t dir_key = ++dir_keys_;
    bool old_listed = false;  // old_entries added to similar_ (on the first file that wants a base)
    std::vector<TreeEntry>& entries = node->entries;
    entries.reserve(names.size());
    for (const auto& name : names) {
      node->jobs.push_back(nullptr);
      node->subdirs.push_back(nullptr);
      node->rels.emplace_back();
      node->stats.emplace_back();
      std::string child_abs = abs + "/" + name;
      std::string child_rel = rel.empty() ? name : rel + "/" + name;
      struct stat sb;
      if (fstatat(dirfd, name.c_str(), &sb, AT_SYMLINK_NOFOLLOW) != 0) return Errno("stat", child_abs);
      TreeEntry e;
      e.name = name;
      e.mode = sb.st_mode & 07777;
      e.uid = sb.st_uid;
      e.gid = sb.st_gid;
      e.mtime_sec = sb.st_mtim.tv_sec;
      e.mtime_nsec = static_cast<uint32_t>(sb.st_mtim.tv_nsec);
      if (!S_ISLNK(sb.st_mode)) LFS_TRY(ReadXattrs(child_abs, &e.xattrs));
      if (!S_ISDIR(sb.st_mode) && sb.st_nlink > 1) e.link_group = LinkGroup(sb);
      const TreeEntry* prev = find_old(name);
      files_++;
      if (S_ISDIR(sb.st_mode)) {
        e.type = EntryType::kDir;
        auto fd = std::make_shared<Fd>(openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (fd->fd < 0) return Errno("open", child_abs);
        std::optional<ObjectId> sub_old;
        if (prev && prev->type == EntryType::kDir) sub_old = prev->id;
        uint64_t bytes_before = logical_, files_before = files_;
        node->subdirs.back() = std::make_unique<DirNode>();
        LFS_TRY(Dir(fd, child_abs, child_rel, sub_old, node->subdirs.back().get()));
        e.size = logical_ - bytes_before;
        e.subtree_entries = files_ - files_before;
      } else if (S_ISREG(sb.st_mode)) {
        e.type = EntryType::kFile;
        e.size = sb.st_size;
        LFS_TRY(File(dir, name, child_abs, child_rel, sb, prev, &e, node,
                     {dir_key, &old_entries, &old_listed}));
      } else if (S_ISLNK(sb.st_mode)) {
        e.type = EntryType::kSymlink;
        std::string target(sb.st_size + 1, '\0');
        ssize_t n = readlinkat(dirfd, name.c_str(), target.data(), target.size());
        if (n < 0) return Errno("read link", child_abs);
        target.resize(n);
        e.target = std::move(target);
        e.size = e.target.size();
      } else {
        e.type = S_ISCHR(sb.st_mode)   ? EntryType::kChar
                 : S_ISBLK(sb.st_mode) ? EntryType::kBlock
                 : S_ISFIFO(sb.st_mode) ? EntryType::kFifo
                                        : EntryType::kSocket;
        e.rdev = sb.st_rdev;
      }
      entries.push_back(std::move(e));
    }
    return Status::Ok();
  }

  // The tree of a walked directory, its subdirectories' first; files take their workers' ids.
  Result<ObjectId> Build(DirNode& node) {
    for (size_t i = 0; i < node.entries.size(); i++) {
      TreeEntry& e = node.entries[i];
      if (node.subdirs[i]) {
        LFS_ASSIGN(e.id, Build(*node.subdirs[i]));
        objects::SummarizeDir(node.subdirs[i]->entries, &e);
      } else if (FileJob* j = node.jobs[i]) {
        e.id = j->id;
        e.chunked = j->chunked;
      }
      if (auto& st = node.stats[i]) {
        st->id = e.id;
        st->chunked = e.chunked;
        stat_batch_.Put(kv::Cf::kIndex, history::StatBranchPrefix(opts_.branch) + node.rels[i], EncodeStat(*st));
      }
    }
    // The directory's previous listing, else a look-alike stored before it in this import.
    std::optional<ObjectId> base = node.old;
    if (!base) base = similar_trees_.Find(node.entries);
    LFS_ASSIGN(auto put, os_.Put(Kind::kTree, objects::EncodeTree(node.entries), base));
    similar_trees_.Add(node.entries, put.id, base);
    Count(put.added, put.stored_bytes);
    return put.id;
  }

  // Where a file is, for SimilarFiles: its directory's key and previous listing.
  struct Place {
    uint64_t dir_key;
    const std::vector<TreeEntry>* old_entries;
    bool* old_listed;
  };

  Status File(const std::shared_ptr<Fd>& dir, const std::string& name, const std::string& abs,
              const std::string& rel, const struct stat& sb, const TreeEntry* prev, TreeEntry* e, DirNode* node,
              Place place) {
    logical_ += sb.st_size;
    stats_.files++;
    meter_.state().objects = stats_.files;
    meter_.state().bytes = logical_;
    meter_.Update();
    if (e->link_group) {
      auto it = links_.find({sb.st_dev, sb.st_ino});
      if (it != links_.end()) {
        // Another name of a file already walked: its id once that is known.
        if (it->second.job) {
          node->jobs.back() = it->second.job;
        } else {
          e->id = it->second.id;
          e->chunked = it->second.chunked;
        }
        return Status::Ok();
      }
    }
    StatEntry now{static_cast<uint64_t>(sb.st_size), Nanos(sb.st_mtim), Nanos(sb.st_ctim),
                  static_cast<uint64_t>(sb.st_ino), static_cast<uint64_t>(sb.st_dev), false, {}};
    FileJob* job = nullptr;
    bool done = false;
    if (auto it = cache_.find(rel); it != cache_.end()) {
      const StatEntry& c = it->second;
      if (c.size == now.size && c.mtime_ns == now.mtime_ns && c.ctime_ns == now.ctime_ns &&
          c.ino == now.ino && c.dev == now.dev &&
          (c.id.IsZero() || os_.Exists(c.chunked ? Kind::kChunkList : Kind::kBlob, c.id).value_or(false))) {
        e->id = c.id;
        e->chunked = c.chunked;
        stats_.stat_hits++;
        done = true;
        TreeEntry known;
        known.size = static_cast<uint64_t>(sb.st_size);
        known.id = c.id;
        known.chunked = c.chunked;
        AddCandidate(place.dir_key, name, known, nullptr);
      }
    }
    if (!done) {
      job = &jobs_.emplace_back();
      job->dir = dir;
      job->name = name;
      job->abs = abs;
      job->size = sb.st_size;
      if (prev && prev->type == EntryType::kFile) {
        job->base = *prev;
      } else {
        LookAlike(job, name, place);
      }
      TreeEntry known;
      known.size = job->size;
      known.chunked = job->size >= history::kChunkThreshold;
      AddCandidate(place.dir_key, name, known, job);
      stats_.hashed++;
      node->jobs.back() = job;
    }
    if (e->link_group) links_[{sb.st_dev, sb.st_ino}] = {job, e->id, e->chunked};
    // A file modified within the last two seconds may change again without its mtime moving
    // ("racily clean" in Git's words): leave it out of the cache so the next import rereads it.
    // Only the mtime decides: a recent ctime alone (chmod, utimensat, a hard link) does not make
    // the content racy, and a later change of the ctime still invalidates the entry.
    if (opts_.use_stat_cache && now.mtime_ns + 2000000000ull < static_cast<uint64_t>(start_ns_)) {
      node->rels.back() = rel;
      node->stats.back() = now;
    }
    if (job) pool_.Submit(job);
    return Status::Ok();
  }

  // On a worker: reads the file and stores its content.
  void RunJob(FileJob& j) {
    RunJobOnce(j);
    {
      std::lock_guard l(done_mu_);
      j.done = true;
    }
    done_cv_.notify_all();
  }

  void RunJobOnce(FileJob& j) {
    if (failed_.load()) {
      j.status = Status::Errorf(ECANCELED, "import of {} cancelled", j.abs);
      j.cancelled = true;
      j.dir.reset();
      return;
    }
    if (FileJob* b = j.base_job) {
      // Submitted before this one and taken first (the pool is FIFO): running or done.
      std::unique_lock l(done_mu_);
      done_cv_.wait(l, [b] { return b->done.load(); });
      if (b->status.ok() && !b->id.IsZero()) {
        TreeEntry base;
        base.size = b->size;
        base.id = b->id;
        base.chunked = b->chunked;
        j.base = base;
      }
    }
    j.status = [&]() -> Status {
      Fd fd(openat(j.dir->fd, j.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (fd.fd < 0) return Errno("open", j.abs);
      const uint64_t size = j.size;
      auto changed = [&] { return Status::Errorf(EAGAIN, "{} changed size while it was imported", j.abs); };
      // Read piecewise: a chunked file is never whole in memory.
      auto read = [&](uint64_t off, size_t len) -> Result<std::string> {
        std::string buf(len, '\0');
        size_t have = 0;
        while (have < len) {
          ssize_t n = pread(fd.fd, buf.data() + have, len - have, static_cast<off_t>(off + have));
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) return Errno("read", j.abs);
          if (n == 0) return changed();
          have += n;
        }
        return buf;
      };
      LFS_ASSIGN(auto stored, history::WriteContentFrom(os_, size, read, j.base ? &*j.base : nullptr));
      char extra;
      if (pread(fd.fd, &extra, 1, static_cast<off_t>(size)) > 0) return changed();
      j.id = stored.id;
      j.chunked = stored.chunked;
      j.objects_added = stored.objects_added;
      j.bytes_added = stored.bytes_added;
      return Status::Ok();
    }();
    j.dir.reset();
    if (!j.status.ok()) failed_ = true;
  }

  // Hard-link groups are numbered 1, 2, ... in walk order (which is sorted, so deterministic):
  // the tree then depends on which paths share an inode, not on inode numbers, so a copy or an
  // export of a tree imports to the same tree, and inodes on different devices never mix.
  uint64_t LinkGroup(const struct stat& sb) {
    return groups_.try_emplace({sb.st_dev, sb.st_ino}, groups_.size() + 1).first->second;
  }

  // A candidate delta base for the files walked after it: a stored file (`job` null) or the
  // file an earlier job is storing.
  void AddCandidate(uint64_t dir_key, const std::string& name, const TreeEntry& file, FileJob* job) {
    if (file.size == 0 || (!job && file.id.IsZero())) return;
    similar_.Add(dir_key, name, file.size, file.chunked, candidates_.size());
    candidates_.push_back({file, job});
  }

  // A delta base for a file without a previous version at its path (history::SimilarFiles):
  // a file of the same name in the previous tree (a move or a copy) or walked before it, or a
  // sibling with the same extension. The previous tree is listed on first need.
  void LookAlike(FileJob* job, const std::string& name, const Place& place) {
    if (!old_listed_ && old_root_) {
      old_listed_ = true;
      std::vector<ObjectId> stack{*old_root_};
      while (!stack.empty()) {
        ObjectId t = stack.back();
        stack.pop_back();
        auto entries = st_.ReadTree(t);
        if (!entries.ok()) continue;
        for (auto& e : *entries) {
          if (e.type == EntryType::kDir) stack.push_back(e.id);
          else if (e.type == EntryType::kFile) AddCandidate(0, e.name, e, nullptr);
        }
      }
    }
    if (!*place.old_listed) {
      *place.old_listed = true;
      for (const auto& e : *place.old_entries)
        if (e.type == EntryType::kFile) AddCandidate(place.dir_key, e.name, e, nullptr);
    }
    auto h = similar_.Find(place.dir_key, name, job->size, job->size >= history::kChunkThreshold);
    if (!h) return;
    const Candidate& c = candidates_[*h];
    if (!c.job) {
      job->base = c.file;
      return;
    }
    // Chains of jobs waiting on jobs stay short (each waits for the one before).
    if (c.job->hops >= kMaxHops) return;
    job->base_job = c.job;
    job->hops = c.job->hops + 1;
  }

  void Count(uint64_t objects, uint64_t bytes) {
    stats_.objects_added += objects;
    stats_.bytes_added += bytes;
  }

  Store& st_;
  objects::ObjectStore& os_;
  const ImportOptions& opts_;
  ImportStats& stats_;
  int64_t start_ns_;
  std::unordered_map<std::string, StatEntry> cache_;
  struct Link {
    FileJob* job;  // the job storing it, or null (its id was known at once)
    ObjectId id;
    bool chunked;
  };
  std::map<std::pair<dev_t, ino_t>, Link> links_;
  std::map<std::pair<dev_t, ino_t>, uint64_t> groups_;
  std::optional<ObjectId> old_root_;
  struct Candidate {
    TreeEntry file;
    FileJob* job;
  };
  static constexpr uint32_t kMaxHops = 64;
  history::SimilarFiles similar_;
  history::SimilarTrees similar_trees_;  // delta bases for new directories' listings
  std::vector<Candidate> candidates_;
  bool old_listed_ = false;
  uint64_t dir_keys_ = 0;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  kv::Batch stat_batch_;
  uint64_t logical_ = 0, files_ = 0;
  ProgressMeter meter_{opts_.progress, "import"};
  std::deque<FileJob> jobs_;  // stable addresses; results read after the pool is done
  std::atomic<bool> failed_{false};
  Pool pool_;  // last: its workers stop before the members they use go
};

}  // namespace

Result<ObjectId> Store::Import(const std::string& dir, const ImportOptions& opts, ImportStats* stats_out) {
  ImportStats stats;
  LFS_ASSIGN(auto head, BranchHead(opts.branch));
  if (!head) return Status::NotFound(fmt::format("no branch '{}'", opts.branch));
  LFS_ASSIGN(auto head_commit, GetCommit(*head));
  Fd root(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.fd < 0) return Errno("open", dir);
  Importer im(*this, opts, stats);
  im.old_root_ = head_commit.root;
  LFS_TRY(im.LoadStatCache());
  auto tree = im.Run(root.fd, dir, head_commit.root);
  if (!tree.ok()) {
    objects_->Abort();
    return tree.status();
  }
  kv::Batch extra;
  std::string sp = history::StatBranchPrefix(opts.branch);
  if (opts.use_stat_cache) extra.DeleteRange(kv::Cf::kIndex, sp, history::PrefixEnd(sp));
  for (const auto& e : im.stat_batch_.entries()) extra.Put(e.cf, e.key, e.value);
  std::string msg = opts.message.empty() ? fmt::format("import {}", dir) : opts.message;
  auto id = CommitTree(opts.branch, *tree, head, msg, im.logical_, im.files_, &extra);
  if (id.ok()) im.meter_.Done();
  if (stats_out) *stats_out = stats;
  return id;
}

}  // namespace layerfs
