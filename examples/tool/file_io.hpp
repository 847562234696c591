// File input and output for the zipccl tool (POSIX).
//
// Reads name the file and the system's reason when they fail. Writes never leave a damaged file
// behind: a regular output is written to a temporary file beside it, flushed to disk and renamed
// into place only when every write, fsync and close has succeeded (on failure the temporary file
// is removed and an existing output keeps its old contents); a symbolic link to a regular file
// keeps the link and replaces the file it names. An output that is not a regular file (a device
// such as /dev/null, a pipe, /dev/stdout) is written in place, with every write and the close
// checked. An existing output the caller may not write is refused, as a plain open would. An output that is the input itself (the same path, a link to it, the same inode) is
// refused before anything is read.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace zipccl_tool {

inline std::runtime_error io_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(err));
}

// The most the tool takes in memory for one input or one output: half of this machine's physical
// memory or of the process's address-space limit (ulimit -v), whichever is smaller (a command
// holds its input and its output at once), or no limit where neither is known. More is refused
// rather than left to swap or to the OOM killer.
inline std::uint64_t memory_limit() {
  std::uint64_t have = UINT64_MAX;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) have = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < have) have = as.rlim_cur;
  return have == UINT64_MAX ? have : have / 2;
}

// The whole file at `path`, which must be a regular file, a device or a pipe (not a directory),
// of at most `limit` bytes: a larger regular file is refused before it is read, and a pipe or
// device that gives more (/dev/zero, say) once the limit is passed, its buffer never grown past
// the limit. `why` names the limit in that error.
inline std::vector<std::uint8_t> read_file(const std::string& path, std::uint64_t limit, const std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw io_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw io_error("cannot read", path, e);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + " is a directory, not a file");
  }
  const auto too_big = [&] {
    return std::runtime_error(path + " holds more than " + std::to_string(limit) + " bytes, " + why);
  };
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > limit) {
    ::close(fd);
    throw too_big();
  }
  std::vector<std::uint8_t> v;
  try {
    if (S_ISREG(st.st_mode) && st.st_size > 0) v.reserve(static_cast<std::size_t>(st.st_size));
    std::uint8_t buf[1 << 16];
    for (;;) {
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got == 0) break;
      if (got < 0) {
        if (errno == EINTR) continue;
        throw io_error("cannot read", path, errno);
      }
      const std::uint64_t size = v.size() + static_cast<std::uint64_t>(got);
      if (size > limit) throw too_big();
      if (size > v.capacity()) {  // grow by doubling, but never past the limit
        const std::uint64_t twice = 2 * static_cast<std::uint64_t>(v.capacity());
        v.reserve(static_cast<std::size_t>(std::max(size, std::min(limit, std::max<std::uint64_t>(twice, 1u << 20)))));
      }
      v.insert(v.end(), buf, buf + got);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return v;
}

// Throws when `out` names the same file as `in` (after links), so that writing it cannot
// destroy the input.
inline void refuse_same_file(const std::string& in, const std::string& out) {
  struct stat a {}, b {};
  if (::stat(in.c_str(), &a) != 0 || ::stat(out.c_str(), &b) != 0) return;  // out does not exist yet
  if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    throw std::runtime_error("the output " + out + " is the input file " + in + "; choose another output");
}

// The steps of write_file.
namespace write_steps {
inline int write_all(int fd, const std::uint8_t* p, std::uint64_t n) {
  while (n > 0) {
    const std::size_t piece = n < (1u << 30) ? static_cast<std::size_t>(n) : (1u << 30);
    const ssize_t put = ::write(fd, p, piece);
    if (put < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (put == 0) return EIO;
    p += put;
    n -= static_cast<std::uint64_t>(put);
  }
  return 0;
}

// Writes through an existing non-regular file (a device, a pipe, /dev/stdout), every call checked.
inline void write_in_place(const std::string& path, const std::uint8_t* p, std::uint64_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw io_error("cannot open", path, errno);
  int e = write_all(fd, p, n);
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e != 0) throw io_error("cannot write", path, e);
}
}  // namespace write_steps

inline void write_file(const std::string& path, const std::uint8_t* p, std::uint64_t n) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0 && errno != ENOENT) throw io_error("cannot write", path, errno);
  std::string target = path;
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw std::runtime_error(path + " is a directory, not a file");
  if (exists && !S_ISREG(st.st_mode)) return write_steps::write_in_place(path, p, n);  // a device or a pipe
  if (S_ISLNK(link.st_mode)) {
    // /dev/stdout, /proc/self/fd/N: the caller means the open file behind it, not a new file in
    // /dev; a dangling link is followed as a plain create would. Other links: the file they name
    // is replaced beside itself, and the link is kept.
    if (!exists || path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0)
      return write_steps::write_in_place(path, p, n);
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) throw io_error("cannot write", path, errno);
    target = real;
    std::free(real);
  }
  if (exists && ::access(target.c_str(), W_OK) != 0) throw io_error("cannot write", path, errno);
  const std::size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : target.substr(0, slash));
  std::string tmp = dir + "/.zipccl-XXXXXX";  // short: a long output name cannot push it past NAME_MAX
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw io_error("cannot create a file beside", path, errno);
  tmp = name.data();
  // the permissions a plain create would give (or the replaced file's)
  mode_t mode = 0;
  if (exists) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  int e = ::fchmod(fd, mode) != 0 ? errno : 0;
  if (e == 0) e = write_steps::write_all(fd, p, n);
  if (e == 0 && ::fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && ::rename(tmp.c_str(), target.c_str()) != 0) e = errno;
  if (e != 0) {
    ::unlink(tmp.c_str());
    throw io_error("cannot write", path, e);
  }
  // the rename itself reaches the disk with the directory
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    const int synced = ::fsync(d);
    const int err = errno;
    ::close(d);
    if (synced != 0 && err != EINVAL) throw io_error("cannot write", path, err);
  }
}

// Whether `path` is the file standard output writes to (/dev/stdout, or the file it is
// redirected to): the tool then prints its summary to standard error instead.
inline bool is_stdout(const std::string& path) {
  struct stat a {}, b {};
  return ::stat(path.c_str(), &a) == 0 && ::fstat(1, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Flushes and closes standard output; throws when anything written to it was lost (a full disk,
// a closed pipe), so that the tool exits non-zero.
inline void close_stdout() {
  const bool bad = std::ferror(stdout) != 0;
  if (std::fflush(stdout) != 0 || bad) {
    const int e = errno;
    throw std::runtime_error(std::string("cannot write to standard output: ") + std::strerror(bad && e == 0 ? EIO : e));
  }
  if (std::fclose(stdout) != 0) throw std::runtime_error(std::string("cannot write to standard output: ") + std::strerror(errno));
}

}  // namespace zipccl_tool
