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
