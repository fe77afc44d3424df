#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/error.h"

namespace attntune {

namespace {

// A full disk, a quota or a failing device is no mistake of the user's: a runtime_error
// (exit 1, "failed:"). Anything else (a missing folder, a path that is a folder, no
// permission) is the path the user gave: UserError (exit 2, "error:").
[[noreturn]] void CannotWrite(const std::string& path, int error) {
  const std::string message = path + ": cannot write (" + std::strerror(error) + ")";
  if (error == ENOSPC || error == EDQUOT || error == EIO || error == EFBIG)
    throw std::runtime_error(message);
  throw UserError(message);
}

}  // namespace

void WriteFileAtomic(const std::string& path, const std::string& bytes) {
  // A device, a FIFO or a socket at the path is not an output to replace (`run --out
  // /dev/null` replaced the device node with a file).
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    throw UserError(path + ": is not a regular file (attntune writes its outputs as files)");
  // A unique temporary name in the same folder, so that rename() replaces atomically and
  // two writers of one path never share a temporary file.
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) CannotWrite(path, errno);
  auto fail = [&](int error) {
    close(fd);
    std::remove(tmp.c_str());
    CannotWrite(path, error);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) fail(errno);
  fchmod(fd, 0644);  // mkstemp creates 0600; outputs are ordinary readable files
  if (close(fd) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    CannotWrite(path, error);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    CannotWrite(path, error);
  }
}

void RefuseToReplace(const std::string& output, const std::string& input, const std::string& what) {
  std::error_code error;
  if (std::filesystem::equivalent(output, input, error) && !error)
    throw UserError(output + ": is " + what + " (" + input + "); give another output path");
}

double PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string ReadInputFile(const std::string& path, uint64_t max_bytes, const std::string& noun,
                          const std::string& why) {
  char limit[64];
  if (max_bytes < (uint64_t{1} << 20)) {
    std::snprintf(limit, sizeof limit, "%llu bytes", static_cast<unsigned long long>(max_bytes));
  } else if (max_bytes % (uint64_t{1} << 20) == 0 && max_bytes < (uint64_t{1} << 30)) {
    std::snprintf(limit, sizeof limit, "%llu MiB",
                  static_cast<unsigned long long>(max_bytes >> 20));
  } else {
    std::snprintf(limit, sizeof limit, "%.1f GiB", static_cast<double>(max_bytes) / 1073741824.0);
  }
  const std::string too_large =
      path + ": holds more than attntune reads as " + noun + " (" + limit + why + ")";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct Close {
    int fd;
    ~Close() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw UserError(path + ": cannot read (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw UserError(path + ": is a folder, not " + noun);
  std::string text;
  if (S_ISREG(st.st_mode)) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) throw UserError(too_large);
    text.reserve(static_cast<size_t>(st.st_size));
  }
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError(path + ": cannot read (" + std::strerror(errno) + ")");
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) throw UserError(too_large);
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

void CreateOutputFolder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) return;
  const std::string message = dir + ": cannot create output folder (" + ec.message() + ")";
  const int error = ec.value();  // an errno: std::filesystem reports the system category
  if (error == ENOSPC || error == EDQUOT || error == EIO) throw std::runtime_error(message);
  throw UserError(message);
}

}  // namespace attntune
