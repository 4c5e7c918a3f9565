// POSIX parity: each case runs the same syscalls on a LayerFS mount and on a directory of the
// host file system (ext4 under /var/tmp) and the two logs must be identical.
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "mount_env.h"
#include "syscall_log.h"

namespace layerfs::itest {
namespace {

using Log = SyscallLog;

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + static_cast<size_t>(seed)) % 26);
  return s;
}

void CreateExcl(Log& s) {
  int fd = s.Open("open O_CREAT|O_EXCL", "f", O_CREAT | O_EXCL | O_WRONLY, 0640);
  s.Write("write", fd, "abc");
  s.Close(fd);
  s.Open("open O_CREAT|O_EXCL again", "f", O_CREAT | O_EXCL | O_WRONLY);
  s.Open("open O_CREAT existing", "f", O_CREAT | O_RDONLY);
  s.Open("open missing", "missing", O_RDONLY);
  s.Open("open missing/x O_CREAT", "missing/x", O_CREAT | O_WRONLY);
  s.Open("open f/x (not a dir)", "f/x", O_RDONLY);
  s.Open("open O_DIRECTORY on file", "f", O_RDONLY | O_DIRECTORY);
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.Open("open dir O_WRONLY", "d", O_WRONLY);
  s.Open("open dir O_CREAT", "d", O_CREAT | O_WRONLY);
  s.Stat("f");
  s.Content("f");
}

void OpenTrunc(Log& s) {
  s.Put("f", "hello world");
  int fd = s.Open("open O_TRUNC", "f", O_WRONLY | O_TRUNC);
  s.Fstat(fd);
  s.Write("write", fd, "hi");
  s.Close(fd);
  s.Stat("f");
  s.Content("f");
  fd = s.Open("open O_CREAT|O_TRUNC existing", "f", O_CREAT | O_RDWR | O_TRUNC);
  s.Fstat(fd);
  s.Close(fd);
  s.Content("f");
}

void OpenAppend(Log& s) {
  s.Put("f", "abc");
  int fd = s.Open("open O_APPEND", "f", O_WRONLY | O_APPEND);
  s.Write("write", fd, "def");
  s.Pwrite("pwrite at 0 appends on Linux", fd, "X", 0);
  s.R("lseek cur", lseek(fd, 0, SEEK_CUR));
  s.Close(fd);
  int fd2 = s.Open("open O_RDWR|O_APPEND", "f", O_RDWR | O_APPEND);
  s.R("lseek 0", lseek(fd2, 0, SEEK_SET));
  s.Write("write after seek", fd2, "ghi");
  s.Pread("pread all", fd2, 100, 0);
  s.Close(fd2);
  s.Stat("f");
  s.Content("f");
}

void ReadWritePread(Log& s) {
  int fd = s.Open("create", "f", O_CREAT | O_RDWR, 0600);
  const std::string data = Pattern(10000, 1);
  s.Write("write 10000", fd, data);
  s.Pread("pread 100@5000", fd, 100, 5000);
  s.Pread("pread 100@9990", fd, 100, 9990);
  s.Pread("pread @20000", fd, 100, 20000);
  s.Pwrite("pwrite ZZ@15000", fd, "ZZ", 15000);
  s.Fstat(fd);
  s.Pread("pread gap", fd, 16, 12000);
  s.R("lseek end", lseek(fd, 0, SEEK_END));
  s.R("lseek set 9998", lseek(fd, 9998, SEEK_SET));
  char buf[8];
  s.R("read 8", read(fd, buf, sizeof buf));
  s.Note("read data", Digest(std::string_view(buf, 2)));
  s.R("lseek negative", lseek(fd, -1, SEEK_SET));
  s.Pwrite("pwrite 64KiB+3 straddling blocks", fd, Pattern(65539, 2), 65533);
  s.Pread("pread straddle", fd, 10, 65530);
  s.Close(fd);
  s.Stat("f");
  s.Content("f");
  fd = s.Open("open O_RDONLY", "f", O_RDONLY);
  s.Write("write on O_RDONLY", fd, "x");
  s.Close(fd);
  fd = s.Open("open O_WRONLY", "f", O_WRONLY);
  s.R("read on O_WRONLY", read(fd, buf, 1));
  s.Close(fd);
}

void TruncateGrowShrink(Log& s) {
  s.Put("f", Pattern(100, 3));
  s.R("truncate grow", truncate(s.P("f").c_str(), 200000));
  s.Stat("f");
  int fd = s.Open("open", "f", O_RDWR);
  s.Pread("pread grown area", fd, 32, 150000);
  s.Pread("pread boundary", fd, 8, 96);
  s.R("ftruncate shrink", ftruncate(fd, 10));
  s.Fstat(fd);
  s.Pread("pread after shrink", fd, 100, 0);
  s.R("ftruncate grow", ftruncate(fd, 70000));
  s.Pread("pread old bytes stay zero", fd, 16, 10);
  s.R("ftruncate negative", ftruncate(fd, -1));
  s.Close(fd);
  s.Content("f");
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("truncate dir", truncate(s.P("d").c_str(), 0));
  s.R("truncate missing", truncate(s.P("missing").c_str(), 0));
  fd = s.Open("open O_RDONLY", "f", O_RDONLY);
  s.R("ftruncate O_RDONLY", ftruncate(fd, 0));
  s.Close(fd);
}

void SparseSeekDataHole(Log& s) {
  int fd = s.Open("create", "f", O_CREAT | O_RDWR);
  const off_t kBlock = 64 << 10;  // both file systems agree at 64 KiB granularity
  s.Pwrite("pwrite block 0", fd, Pattern(kBlock, 4), 0);
  s.Pwrite("pwrite block @1MiB", fd, Pattern(kBlock, 5), 1 << 20);
  s.Fstat(fd);
  s.R("SEEK_DATA 0", lseek(fd, 0, SEEK_DATA));
  s.R("SEEK_HOLE 0", lseek(fd, 0, SEEK_HOLE));
  s.R("SEEK_DATA 100", lseek(fd, 100, SEEK_DATA));
  s.R("SEEK_DATA 64KiB", lseek(fd, kBlock, SEEK_DATA));
  s.R("SEEK_HOLE 64KiB", lseek(fd, kBlock, SEEK_HOLE));
  s.R("SEEK_HOLE 1MiB", lseek(fd, 1 << 20, SEEK_HOLE));
  s.R("SEEK_DATA at EOF", lseek(fd, (1 << 20) + kBlock, SEEK_DATA));
  s.R("SEEK_HOLE at EOF", lseek(fd, (1 << 20) + kBlock, SEEK_HOLE));
  s.R("SEEK_DATA past EOF", lseek(fd, 10 << 20, SEEK_DATA));
  s.Pread("pread hole", fd, 64, 500000);
  s.Pread("pread data", fd, 16, 1 << 20);
  s.Close(fd);
  s.Content("f");
}

// Misses are cached by the kernel as negative entries; every way a name comes into being
// through the mount must show at once.
void NegativeEntriesInvalidated(Log& s) {
  s.Stat("n1");
  s.Put("n1", "created after a miss");
  s.Stat("n1");
  s.Content("n1");
  s.Lstat("n2");
  s.R("mkdir after a miss", mkdir(s.P("n2").c_str(), 0755));
  s.Lstat("n2");
  s.Stat("n3");
  s.R("rename onto a missed name", rename(s.P("n1").c_str(), s.P("n3").c_str()));
  s.Stat("n3");
  s.Stat("n1");
  s.Stat("n4");
  s.R("link onto a missed name", link(s.P("n3").c_str(), s.P("n4").c_str()));
  s.Stat("n4");
  s.Lstat("n5");
  s.R("symlink onto a missed name", symlink("n3", s.P("n5").c_str()));
  s.Content("n5");
  s.R("mknod fifo onto a missed name", mknod(s.P("n6").c_str(), S_IFIFO | 0644, 0));
  s.Lstat("n6");
  s.R("unlink", unlink(s.P("n3").c_str()));
  s.Stat("n3");
  s.Put("n3", "again");
  s.Content("n3");
}

void FallocateMode0(Log& s) {
  int fd = s.Open("create", "f", O_CREAT | O_RDWR);
  s.Write("write", fd, "head");
  s.R("fallocate 0..100000", fallocate(fd, 0, 0, 100000));
  s.Fstat(fd);
  s.Pread("pread", fd, 16, 0);
  s.Pread("pread allocated", fd, 16, 99990);
  s.R("fallocate 50000+200000", fallocate(fd, 0, 50000, 200000));
  s.Fstat(fd);
  s.R("fallocate inside", fallocate(fd, 0, 10, 20));
  s.Fstat(fd);
  s.R("fallocate len 0", fallocate(fd, 0, 0, 0));
  s.Close(fd);
  s.Content("f");
}

// Punching a hole and zeroing a range (FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE), in a file's
// middle, across its end, with and without keeping its size, and the combinations refused.
void FallocateHolesAndZeros(Log& s) {
  int fd = s.Open("create", "f", O_CREAT | O_RDWR);
  s.Write("write", fd, Pattern(200000, 'h'));
  s.R("punch 4096+65536", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 65536));
  s.Pread("pread punched", fd, 32, 4090);
  s.R("punch without keep size", fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 10));
  s.R("punch past the end", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 190000, 100000));
  s.Fstat(fd);
  s.R("zero 1000+3000", fallocate(fd, FALLOC_FL_ZERO_RANGE, 1000, 3000));
  s.R("zero across the end, keep size", fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 170000, 100000));
  s.Fstat(fd);
  s.R("zero across the end", fallocate(fd, FALLOC_FL_ZERO_RANGE, 150000, 100000));
  s.Fstat(fd);
  s.R("zero and punch", fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 10));
  s.Close(fd);
  s.Content("f");
}

void MkdirRmdir(Log& s) {
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0750));
  s.Stat("d");
  s.R("mkdir d again", mkdir(s.P("d").c_str(), 0755));
  s.R("mkdir d/sub", mkdir(s.P("d/sub").c_str(), 0755));
  s.Stat("d");
  s.R("rmdir non-empty", rmdir(s.P("d").c_str()));
  s.Put("f", "x");
  s.R("rmdir file", rmdir(s.P("f").c_str()));
  s.R("rmdir missing", rmdir(s.P("missing").c_str()));
  s.R("mkdir missing/x", mkdir(s.P("missing/x").c_str(), 0755));
  s.R("mkdir f/x", mkdir(s.P("f/x").c_str(), 0755));
  s.R("mkdir over file", mkdir(s.P("f").c_str(), 0755));
  s.R("rmdir d/sub/.", rmdir(s.P("d/sub/.").c_str()));
  s.R("rmdir d/sub", rmdir(s.P("d/sub").c_str()));
  s.Stat("d");
  s.R("rmdir d", rmdir(s.P("d").c_str()));
  s.Stat("d");
  s.List("");
}

void UnlinkDir(Log& s) {
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("unlink dir", unlink(s.P("d").c_str()));
  s.R("unlink missing", unlink(s.P("missing").c_str()));
  s.R("unlink missing/x", unlink(s.P("missing/x").c_str()));
  s.Put("f", "x");
  s.R("unlink f", unlink(s.P("f").c_str()));
  s.R("unlink f again", unlink(s.P("f").c_str()));
  s.List("");
}

void UnlinkOpenFile(Log& s) {
  s.Put("f", "payload");
  int fd = s.Open("open", "f", O_RDWR);
  s.R("unlink", unlink(s.P("f").c_str()));
  s.Stat("f");
  s.Fstat(fd);
  s.Pread("pread via fd", fd, 100, 0);
  s.Pwrite("pwrite via fd", fd, "MORE", 7);
  s.Pread("pread again", fd, 100, 0);
  s.R("ftruncate via fd", ftruncate(fd, 3));
  s.Fstat(fd);
  s.Close(fd);
  s.Stat("f");
  s.List("");
}

void RenameOverFile(Log& s) {
  s.Put("a", "AAA");
  s.Put("b", "BBBBB");
  s.R("link b b2", link(s.P("b").c_str(), s.P("b2").c_str()));
  s.R("rename a b", rename(s.P("a").c_str(), s.P("b").c_str()));
  s.Stat("a");
  s.Stat("b");
  s.Stat("b2");
  s.Content("b");
  s.R("rename b b (same)", rename(s.P("b").c_str(), s.P("b").c_str()));
  s.R("rename missing", rename(s.P("missing").c_str(), s.P("x").c_str()));
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("rename b d/c", rename(s.P("b").c_str(), s.P("d/c").c_str()));
  s.Content("d/c");
  s.List("");
  s.List("d");
}

void RenameDirOverNonEmptyDir(Log& s) {
  s.R("mkdir d1", mkdir(s.P("d1").c_str(), 0755));
  s.Put("d1/inner", "1");
  s.R("mkdir d2", mkdir(s.P("d2").c_str(), 0755));
  s.Put("d2/x", "2");
  s.R("mkdir d3", mkdir(s.P("d3").c_str(), 0755));
  s.R("rename d1 over non-empty d2", rename(s.P("d1").c_str(), s.P("d2").c_str()));
  s.R("rename d1 over empty d3", rename(s.P("d1").c_str(), s.P("d3").c_str()));
  s.Content("d3/inner");
  s.R("rename d3 into itself", rename(s.P("d3").c_str(), s.P("d3/sub").c_str()));
  s.R("rename d3 into d2", rename(s.P("d3").c_str(), s.P("d2/d3").c_str()));
  s.Stat("d2");
  s.Content("d2/d3/inner");
  s.List("");
  s.List("d2");
}

void RenameFileOverDir(Log& s) {
  s.Put("f", "file");
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("mkdir e", mkdir(s.P("e").c_str(), 0755));
  s.R("rename file over dir", rename(s.P("f").c_str(), s.P("d").c_str()));
  s.R("rename dir over file", rename(s.P("e").c_str(), s.P("f").c_str()));
  s.R("rename f/x (not dir)", rename(s.P("f/x").c_str(), s.P("y").c_str()));
  s.Stat("f");
  s.Stat("d");
  s.List("");
}

void Renameat2NoReplace(Log& s) {
  s.Put("a", "AAA");
  s.Put("b", "BBB");
  s.R("RENAME_NOREPLACE onto existing", renameat2(AT_FDCWD, s.P("a").c_str(), AT_FDCWD, s.P("b").c_str(), RENAME_NOREPLACE));
  s.R("RENAME_NOREPLACE to new", renameat2(AT_FDCWD, s.P("a").c_str(), AT_FDCWD, s.P("c").c_str(), RENAME_NOREPLACE));
  s.Content("b");
  s.Content("c");
  s.Stat("a");
  s.List("");
}

void Renameat2Exchange(Log& s) {
  s.Put("a", "AAA");
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0700));
  s.Put("d/inside", "in");
  s.R("RENAME_EXCHANGE file<->dir", renameat2(AT_FDCWD, s.P("a").c_str(), AT_FDCWD, s.P("d").c_str(), RENAME_EXCHANGE));
  s.Stat("a");
  s.Stat("d");
  s.Content("d");
  s.Content("a/inside");
  s.Put("b", "BBB");
  s.R("RENAME_EXCHANGE files", renameat2(AT_FDCWD, s.P("d").c_str(), AT_FDCWD, s.P("b").c_str(), RENAME_EXCHANGE));
  s.Content("b");
  s.Content("d");
  s.R("RENAME_EXCHANGE with missing", renameat2(AT_FDCWD, s.P("b").c_str(), AT_FDCWD, s.P("none").c_str(), RENAME_EXCHANGE));
  s.R("RENAME_EXCHANGE|NOREPLACE", renameat2(AT_FDCWD, s.P("b").c_str(), AT_FDCWD, s.P("d").c_str(), RENAME_EXCHANGE | RENAME_NOREPLACE));
  s.List("");
  s.List("a");
}

void HardLinks(Log& s) {
  s.Put("a", "linked");
  s.R("link a b", link(s.P("a").c_str(), s.P("b").c_str()));
  s.Stat("a");
  s.Stat("b");
  s.R("link a b again", link(s.P("a").c_str(), s.P("b").c_str()));
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("link dir", link(s.P("d").c_str(), s.P("e").c_str()));
  s.R("link a d/c", link(s.P("a").c_str(), s.P("d/c").c_str()));
  s.Stat("a");
  int fd = s.Open("open b", "b", O_WRONLY | O_APPEND);
  s.Write("append via b", fd, "+more");
  s.Close(fd);
  s.Content("a");
  s.R("unlink a", unlink(s.P("a").c_str()));
  s.Stat("b");
  s.Content("d/c");
  s.R("link missing", link(s.P("missing").c_str(), s.P("x").c_str()));
  s.R("chmod b", chmod(s.P("b").c_str(), 0600));
  s.Stat("d/c");
  s.List("");
}

void Symlinks(Log& s) {
  s.R("symlink dangling", symlink("target/x", s.P("l").c_str()));
  char buf[256];
  ssize_t n = readlink(s.P("l").c_str(), buf, sizeof buf);
  s.R("readlink", n);
  if (n > 0) s.Note("readlink target", std::string(buf, static_cast<size_t>(n)));
  s.R("readlink short buffer", readlink(s.P("l").c_str(), buf, 3));
  s.Note("readlink short", std::string(buf, 3));
  s.Lstat("l");
  s.Stat("l");
  s.Put("f", "via link");
  s.R("symlink to f", symlink("f", s.P("lf").c_str()));
  s.Stat("lf");
  s.Content("lf");
  s.R("readlink on file", readlink(s.P("f").c_str(), buf, sizeof buf));
  s.R("symlink over existing", symlink("x", s.P("f").c_str()));
  s.Open("open O_NOFOLLOW", "lf", O_RDONLY | O_NOFOLLOW);
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("symlink to dir", symlink("d", s.P("ld").c_str()));
  s.Put("ld/inner", "through");
  s.Content("d/inner");
  s.R("rmdir symlink", rmdir(s.P("ld").c_str()));
  s.R("unlink symlink", unlink(s.P("lf").c_str()));
  s.Stat("f");
  s.List("");
}

void MknodFifoAndDevice(Log& s) {
  s.R("mkfifo", mkfifo(s.P("fifo").c_str(), 0640));
  s.Lstat("fifo");
  s.R("mkfifo again", mkfifo(s.P("fifo").c_str(), 0640));
  s.R("mknod chr 1:3", mknod(s.P("null").c_str(), S_IFCHR | 0666, makedev(1, 3)));
  s.Lstat("null");
  s.R("mknod blk 7:0", mknod(s.P("loop").c_str(), S_IFBLK | 0600, makedev(7, 0)));
  s.Lstat("loop");
  s.R("mknod reg", mknod(s.P("reg").c_str(), S_IFREG | 0644, 0));
  s.Lstat("reg");
  s.R("mknod sock", mknod(s.P("sock").c_str(), S_IFSOCK | 0644, 0));
  s.Lstat("sock");
  int fd = s.Open("open fifo nonblocking read", "fifo", O_RDONLY | O_NONBLOCK);
  s.Close(fd);
  s.R("unlink fifo", unlink(s.P("fifo").c_str()));
  s.List("");
}

void ChmodChown(Log& s) {
  s.Put("f", "x");
  s.R("chmod 0600", chmod(s.P("f").c_str(), 0600));
  s.Stat("f");
  s.R("chmod 07755", chmod(s.P("f").c_str(), 07755));
  s.Stat("f");
  s.R("chown 1234:5678", chown(s.P("f").c_str(), 1234, 5678));
  s.Stat("f");
  int fd = s.Open("open", "f", O_RDWR);
  s.R("fchmod 06711", fchmod(fd, 06711));
  s.R("fchown -1:42", fchown(fd, static_cast<uid_t>(-1), 42));
  s.Fstat(fd);
  s.R("fchmod 04755", fchmod(fd, 04755));
  s.Write("write (clears setuid)", fd, "y");
  s.Fstat(fd);
  s.Close(fd);
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("chmod dir 01777", chmod(s.P("d").c_str(), 01777));
  s.Stat("d");
  s.R("symlink", symlink("f", s.P("l").c_str()));
  s.R("lchown link", lchown(s.P("l").c_str(), 7, 8));
  s.Lstat("l");
  s.Stat("l");
  s.R("chmod missing", chmod(s.P("missing").c_str(), 0644));
}

void Utimensat(Log& s) {
  s.Put("f", "t");
  timespec ts[2] = {{1000000000, 123456789}, {2000000000, 987654321}};
  s.R("utimensat explicit", utimensat(AT_FDCWD, s.P("f").c_str(), ts, 0));
  struct stat st {};
  stat(s.P("f").c_str(), &st);
  s.Note("atime", fmt::format("{}.{:09}", st.st_atim.tv_sec, st.st_atim.tv_nsec));
  s.Note("mtime", fmt::format("{}.{:09}", st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
  timespec omit[2] = {{0, UTIME_OMIT}, {1500000000, 5}};
  s.R("utimensat atime OMIT", utimensat(AT_FDCWD, s.P("f").c_str(), omit, 0));
  stat(s.P("f").c_str(), &st);
  s.Note("atime kept", fmt::format("{}.{:09}", st.st_atim.tv_sec, st.st_atim.tv_nsec));
  s.Note("mtime set", fmt::format("{}.{:09}", st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
  timespec before{}, after{};
  clock_gettime(CLOCK_REALTIME, &before);
  timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  s.R("utimensat atime NOW, mtime OMIT", utimensat(AT_FDCWD, s.P("f").c_str(), now, 0));
  clock_gettime(CLOCK_REALTIME, &after);
  stat(s.P("f").c_str(), &st);
  auto in = [&](const timespec& t) {
    auto ns = [](const timespec& x) { return x.tv_sec * 1000000000LL + x.tv_nsec; };
    // The kernel truncates "now" to its timestamp granularity (jiffies on ext4 too).
    return ns(t) >= ns(before) - 20000000 && ns(t) <= ns(after) + 1000;
  };
  s.Note("atime is now", in(st.st_atim) ? "yes" : "no");
  s.Note("mtime still set", fmt::format("{}.{:09}", st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
  clock_gettime(CLOCK_REALTIME, &before);
  s.R("utimensat NULL (both now)", utimensat(AT_FDCWD, s.P("f").c_str(), nullptr, 0));
  clock_gettime(CLOCK_REALTIME, &after);
  stat(s.P("f").c_str(), &st);
  s.Note("both now", in(st.st_atim) && in(st.st_mtim) ? "yes" : "no");
  s.R("symlink", symlink("f", s.P("l").c_str()));
  s.R("utimensat NOFOLLOW on link", utimensat(AT_FDCWD, s.P("l").c_str(), ts, AT_SYMLINK_NOFOLLOW));
  lstat(s.P("l").c_str(), &st);
  s.Note("link mtime", fmt::format("{}.{:09}", st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
  int fd = s.Open("open", "f", O_RDWR);
  s.R("futimens", futimens(fd, ts));
  fstat(fd, &st);
  s.Note("futimens mtime", fmt::format("{}.{:09}", st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
  s.Close(fd);
}

void Xattrs(Log& s) {
  s.Put("f", "x");
  const std::string p = s.P("f");
  s.R("setxattr user.a", setxattr(p.c_str(), "user.a", "12345", 5, 0));
  s.R("setxattr user.a XATTR_CREATE", setxattr(p.c_str(), "user.a", "1", 1, XATTR_CREATE));
  s.R("setxattr user.b XATTR_REPLACE", setxattr(p.c_str(), "user.b", "1", 1, XATTR_REPLACE));
  s.R("setxattr user.a XATTR_REPLACE", setxattr(p.c_str(), "user.a", "replaced", 8, XATTR_REPLACE));
  s.R("setxattr user.empty", setxattr(p.c_str(), "user.empty", "", 0, 0));
  s.R("setxattr user.b XATTR_CREATE", setxattr(p.c_str(), "user.b", "bee", 3, XATTR_CREATE));
  char buf[64];
  s.R("getxattr size probe", getxattr(p.c_str(), "user.a", nullptr, 0));
  s.R("getxattr small buffer", getxattr(p.c_str(), "user.a", buf, 2));
  ssize_t n = getxattr(p.c_str(), "user.a", buf, sizeof buf);
  s.R("getxattr", n);
  if (n >= 0) s.Note("value", Digest(std::string_view(buf, static_cast<size_t>(n))));
  s.R("getxattr empty", getxattr(p.c_str(), "user.empty", buf, sizeof buf));
  s.R("getxattr missing", getxattr(p.c_str(), "user.none", buf, sizeof buf));
  s.R("listxattr probe", listxattr(p.c_str(), nullptr, 0));
  s.R("listxattr small buffer", listxattr(p.c_str(), buf, 3));
  n = listxattr(p.c_str(), buf, sizeof buf);
  s.R("listxattr", n);
  if (n > 0) {
    std::vector<std::string> names;
    for (const char* q = buf; q < buf + n; q += strlen(q) + 1) names.emplace_back(q);
    std::sort(names.begin(), names.end());
    s.Note("names", fmt::format("{}", fmt::join(names, ",")));
  }
  s.R("removexattr user.a", removexattr(p.c_str(), "user.a"));
  s.R("removexattr user.a again", removexattr(p.c_str(), "user.a"));
  s.R("getxattr removed", getxattr(p.c_str(), "user.a", buf, sizeof buf));
  s.R("listxattr after remove", listxattr(p.c_str(), nullptr, 0));
  s.R("setxattr missing file", setxattr(s.P("missing").c_str(), "user.a", "1", 1, 0));
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("setxattr on dir", setxattr(s.P("d").c_str(), "user.d", "dir", 3, 0));
  s.R("getxattr on dir", getxattr(s.P("d").c_str(), "user.d", buf, sizeof buf));
  int fd = s.Open("open", "f", O_RDONLY);
  s.R("fgetxattr", fgetxattr(fd, "user.b", buf, sizeof buf));
  s.Close(fd);
}

void NameLengths(Log& s) {
  const std::string n255(255, 'n'), n256(256, 'n');
  int fd = s.Open("create 255", n255, O_CREAT | O_WRONLY);
  s.Close(fd);
  s.Stat(n255);
  s.Open("create 256", n256, O_CREAT | O_WRONLY);
  s.R("mkdir 256", mkdir(s.P(n256).c_str(), 0755));
  s.Stat(n256);
  s.R("rename 255 -> 256", rename(s.P(n255).c_str(), s.P(n256).c_str()));
  s.R("symlink 256", symlink("x", s.P(n256).c_str()));
  s.R("link 255 -> 256", link(s.P(n255).c_str(), s.P(n256).c_str()));
  s.R("mkdir 255 (exists)", mkdir(s.P(n255).c_str(), 0755));
  s.R("unlink 255", unlink(s.P(n255).c_str()));
  s.List("");
}

void StatfsWorks(Log& s) {
  struct statfs sf {};
  s.R("statfs", statfs(s.P("").c_str(), &sf));
  s.Note("namemax", std::to_string(sf.f_namelen));
  s.Note("bsize > 0", sf.f_bsize > 0 ? "yes" : "no");
  s.Note("bavail <= blocks", sf.f_bavail <= sf.f_blocks ? "yes" : "no");
  struct statvfs sv {};
  s.R("statvfs", statvfs(s.P("").c_str(), &sv));
  s.Note("statvfs namemax", std::to_string(sv.f_namemax));
  s.Put("f", "x");
  int fd = s.Open("open", "f", O_RDONLY);
  s.R("fstatfs", fstatfs(fd, &sf));
  s.Close(fd);
}

void FsyncFdatasync(Log& s) {
  int fd = s.Open("create", "f", O_CREAT | O_RDWR);
  s.Write("write", fd, "durable");
  s.R("fsync", fsync(fd));
  s.R("fdatasync", fdatasync(fd));
  s.Close(fd);
  fd = s.Open("open O_RDONLY", "f", O_RDONLY);
  s.R("fsync O_RDONLY", fsync(fd));
  s.Close(fd);
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  int dfd = s.Open("open dir", "d", O_RDONLY | O_DIRECTORY);
  s.R("fsync dir", fsync(dfd));
  s.R("fdatasync dir", fdatasync(dfd));
  s.Close(dfd);
  s.Content("f");
}

void FlockLocks(Log& s) {
  s.Put("f", "lock");
  int a = s.Open("open a", "f", O_RDWR);
  int b = s.Open("open b", "f", O_RDWR);
  s.R("flock a EX", flock(a, LOCK_EX));
  s.R("flock b EX|NB", flock(b, LOCK_EX | LOCK_NB));
  s.R("flock b SH|NB", flock(b, LOCK_SH | LOCK_NB));
  s.R("flock a UN", flock(a, LOCK_UN));
  s.R("flock b SH|NB after unlock", flock(b, LOCK_SH | LOCK_NB));
  s.R("flock a SH|NB shared", flock(a, LOCK_SH | LOCK_NB));
  s.R("flock a EX|NB while b shares", flock(a, LOCK_EX | LOCK_NB));
  s.Close(a);
  s.Close(b);
}

void FcntlLocks(Log& s) {
  s.Put("f", std::string(200, 'l'));
  int fd = s.Open("open", "f", O_RDWR);
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 100;
  s.R("F_SETLK write 0..100", fcntl(fd, F_SETLK, &fl));
  // Another process sees the conflict.
  pid_t pid = fork();
  if (pid == 0) {
    struct flock c {};
    c.l_type = F_WRLCK;
    c.l_whence = SEEK_SET;
    c.l_start = 50;
    c.l_len = 10;
    int code = 0;
    if (fcntl(fd, F_SETLK, &c) == 0) code = 1;
    else if (errno != EAGAIN && errno != EACCES) code = 2;
    struct flock q {};
    q.l_type = F_WRLCK;
    q.l_whence = SEEK_SET;
    q.l_start = 0;
    q.l_len = 0;
    if (fcntl(fd, F_GETLK, &q) != 0 || q.l_type != F_WRLCK || q.l_start != 0 || q.l_len != 100) code |= 4;
    c.l_start = 150;
    if (fcntl(fd, F_SETLK, &c) != 0) code |= 8;  // no conflict beyond the lock
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  s.Note("child lock checks", WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "crashed");
  fl.l_type = F_UNLCK;
  s.R("F_SETLK unlock", fcntl(fd, F_SETLK, &fl));
  // Open file description locks conflict between two descriptors of one process.
  int fd2 = s.Open("open second", "f", O_RDWR);
  struct flock o {};
  o.l_type = F_WRLCK;
  o.l_whence = SEEK_SET;
  o.l_len = 10;
  s.R("F_OFD_SETLK fd", fcntl(fd, F_OFD_SETLK, &o));
  s.R("F_OFD_SETLK fd2 conflicts", fcntl(fd2, F_OFD_SETLK, &o));
  o.l_type = F_UNLCK;
  s.R("F_OFD_SETLK unlock", fcntl(fd, F_OFD_SETLK, &o));
  o.l_type = F_WRLCK;
  s.R("F_OFD_SETLK fd2 now", fcntl(fd2, F_OFD_SETLK, &o));
  s.Close(fd);
  s.Close(fd2);
}

void Mmap(Log& s) {
  int fd = s.Open("create", "f", O_CREAT | O_RDWR);
  s.R("ftruncate 8192", ftruncate(fd, 8192));
  void* p = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  s.Note("mmap shared", p == MAP_FAILED ? ErrName(errno) : "ok");
  if (p != MAP_FAILED) {
    memcpy(static_cast<char*>(p) + 100, "mmap data", 9);
    memcpy(static_cast<char*>(p) + 5000, "second page", 11);
    s.R("msync", msync(p, 8192, MS_SYNC));
    s.R("munmap", munmap(p, 8192));
  }
  s.Pread("read back 100", fd, 9, 100);
  s.Pread("read back 5000", fd, 11, 5000);
  s.Close(fd);
  s.Content("f");
  s.Put("g", Pattern(10000, 6));
  fd = s.Open("open g", "g", O_RDONLY);
  void* q = mmap(nullptr, 10000, PROT_READ, MAP_PRIVATE, fd, 0);
  s.Note("mmap private read", q == MAP_FAILED ? ErrName(errno) : "ok");
  if (q != MAP_FAILED) {
    s.Note("mapped bytes", Digest(std::string_view(static_cast<char*>(q), 10000)));
    munmap(q, 10000);
  }
  void* w = mmap(nullptr, 10000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  s.Note("mmap shared writable on O_RDONLY", w == MAP_FAILED ? ErrName(errno) : "ok");
  if (w != MAP_FAILED) munmap(w, 10000);
  s.Close(fd);
}

void LargeSparseFile(Log& s) {
  const off_t k5G = 5LL << 30;
  int fd = s.Open("create", "big", O_CREAT | O_RDWR);
  s.Pwrite("pwrite @5GiB", fd, "hello", k5G);
  s.Fstat(fd);
  s.Pread("pread @5GiB", fd, 5, k5G);
  s.Pread("pread across", fd, 8, k5G - 3);
  s.Pread("pread hole @1GiB", fd, 16, 1LL << 30);
  s.Pread("pread hole @4GiB+1", fd, 16, (4LL << 30) + 1);
  s.R("SEEK_DATA 0", lseek(fd, 0, SEEK_DATA));
  s.R("SEEK_HOLE 0", lseek(fd, 0, SEEK_HOLE));
  s.R("lseek end", lseek(fd, 0, SEEK_END));
  s.Close(fd);
  s.Stat("big");
  s.R("truncate to 4GiB+7", truncate(s.P("big").c_str(), (4LL << 30) + 7));
  s.Stat("big");
}

// copy_file_range(2), which the daemon serves itself: offsets, holes, short copies at the
// source's end, one file to itself, the descriptor's own offsets, and the kernel's refusals.
void CopyFileRange(Log& s) {
  std::string src(200000, '\0');
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<char>('A' + (i * 13) % 57);
  s.Put("src", src);
  int in = s.Open("open src", "src", O_RDWR);
  int out = s.Open("create dst", "dst", O_CREAT | O_RDWR);
  auto cfr = [&](const char* what, int fi, off_t oi, int fo, off_t oo, size_t len, unsigned flags = 0) {
    loff_t a = oi, b = oo;
    long rc = s.R(what, copy_file_range(fi, &a, fo, &b, len, flags));
    if (rc >= 0) s.Note(fmt::format("{} offsets", what), fmt::format("{} {}", a, b));
  };
  cfr("whole", in, 0, out, 0, src.size());
  s.Content("dst");
  cfr("into a hole", in, 1000, out, 300000, 100000);
  s.Fstat(out);
  s.Content("dst");
  s.Pread("read the hole", out, 64, 250000);
  cfr("short at the end", in, 150000, out, 5, 1 << 20);
  cfr("at the end", in, 200000, out, 0, 10);
  cfr("past the end", in, 300000, out, 0, 10);
  cfr("nothing", in, 0, out, 0, 0);
  s.Content("dst");
  cfr("same file, apart", in, 0, in, 250000, 1000);
  s.Fstat(in);
  s.Content("src");
  cfr("same file, overlapping", in, 0, in, 500, 1000);
  cfr("flags", in, 0, out, 0, 10, 1);
  // The descriptors' own offsets move.
  s.R("lseek in", lseek(in, 10, SEEK_SET));
  s.R("lseek out", lseek(out, 20, SEEK_SET));
  s.R("null offsets", copy_file_range(in, nullptr, out, nullptr, 4096, 0));
  s.R("in offset", lseek(in, 0, SEEK_CUR));
  s.R("out offset", lseek(out, 0, SEEK_CUR));
  s.Content("dst");
  int ro = s.Open("open dst read-only", "dst", O_RDONLY);
  cfr("into a read-only descriptor", in, 0, ro, 0, 10);
  int ap = s.Open("open dst append", "dst", O_WRONLY | O_APPEND);
  cfr("into an append descriptor", in, 0, ap, 0, 10);
  int wo = s.Open("open src write-only", "src", O_WRONLY);
  cfr("from a write-only descriptor", wo, 0, out, 0, 10);
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  int dir = s.Open("open d", "d", O_RDONLY | O_DIRECTORY);
  cfr("from a directory", dir, 0, out, 0, 10);
  s.Close(in);
  s.Close(out);
  s.Stat("dst");
}

void Readdir(Log& s) {
  s.Put("a", "1");
  s.Put("b", "2");
  s.Put("c", "3");
  s.R("mkdir d", mkdir(s.P("d").c_str(), 0755));
  s.R("symlink e", symlink("a", s.P("e").c_str()));
  s.R("mkfifo f", mkfifo(s.P("f").c_str(), 0644));
  s.List("");
  s.List("d");
  s.R("unlink b", unlink(s.P("b").c_str()));
  s.R("rename c -> d/c", rename(s.P("c").c_str(), s.P("d/c").c_str()));
  s.List("");
  s.List("d");
  s.List("a");
  s.List("missing");
  // Many entries: several readdir buffers, and rewinddir sees a change.
  for (int i = 0; i < 300; ++i) {
    std::string n = fmt::format("d/many_{:03}_{}", i, std::string(40, 'x'));
    int fd = open(s.P(n).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
  }
  s.List("d");
  DIR* dir = opendir(s.P("d").c_str());
  int count = 0;
  while (dir && readdir(dir)) ++count;
  s.Note("entries", std::to_string(count));
  s.Put("d/late", "x");
  if (dir) rewinddir(dir);
  count = 0;
  while (dir && readdir(dir)) ++count;
  s.Note("entries after rewind", std::to_string(count));
  if (dir) closedir(dir);
}

struct Case {
  const char* name;
  void (*run)(Log&);
};

const Case kCases[] = {
    {"CreateExcl", CreateExcl},
    {"OpenTrunc", OpenTrunc},
    {"OpenAppend", OpenAppend},
    {"ReadWritePread", ReadWritePread},
    {"TruncateGrowShrink", TruncateGrowShrink},
    {"SparseSeekDataHole", SparseSeekDataHole},
    {"FallocateMode0", FallocateMode0},
    {"FallocateHolesAndZeros", FallocateHolesAndZeros},
    {"NegativeEntriesInvalidated", NegativeEntriesInvalidated},
    {"MkdirRmdir", MkdirRmdir},
    {"UnlinkDir", UnlinkDir},
    {"UnlinkOpenFile", UnlinkOpenFile},
    {"RenameOverFile", RenameOverFile},
    {"RenameDirOverNonEmptyDir", RenameDirOverNonEmptyDir},
    {"RenameFileOverDir", RenameFileOverDir},
    {"Renameat2NoReplace", Renameat2NoReplace},
    {"Renameat2Exchange", Renameat2Exchange},
    {"HardLinks", HardLinks},
    {"Symlinks", Symlinks},
    {"MknodFifoAndDevice", MknodFifoAndDevice},
    {"ChmodChown", ChmodChown},
    {"Utimensat", Utimensat},
    {"Xattrs", Xattrs},
    {"NameLengths", NameLengths},
    {"Statfs", StatfsWorks},
    {"FsyncFdatasync", FsyncFdatasync},
    {"FlockLocks", FlockLocks},
    {"FcntlLocks", FcntlLocks},
    {"Mmap", Mmap},
    {"LargeSparseFile", LargeSparseFile},
    {"Readdir", Readdir},
    {"CopyFileRange", CopyFileRange},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, SameAsHost) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  SyscallLog host(env.host()), mnt(env.mnt());
  GetParam().run(host);
  host.CloseAll();
  GetParam().run(mnt);
  mnt.CloseAll();
  const size_t n = std::max(host.lines.size(), mnt.lines.size());
  std::string diff;
  for (size_t i = 0; i < n; ++i) {
    const std::string h = i < host.lines.size() ? host.lines[i] : "(none)";
    const std::string m = i < mnt.lines.size() ? mnt.lines[i] : "(none)";
    if (h != m) diff += fmt::format("  host:  {}\n  mount: {}\n", h, m);
  }
  EXPECT_TRUE(diff.empty()) << GetParam().name << " differs from the host file system:\n" << diff;
  EXPECT_TRUE(env.mount().serving());
}

INSTANTIATE_TEST_SUITE_P(Posix, Parity, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace layerfs::itest
