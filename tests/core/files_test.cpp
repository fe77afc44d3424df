// WriteFileAtomic: the one way attntune writes a file. A failed write leaves neither a
// temporary file nor a damaged old file behind.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "core/files.h"
#include "core/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/user_error_text.h"

namespace attntune {
namespace {

namespace fs = std::filesystem;


// The message of the error that `f` throws when it is not the user's mistake: a
// std::runtime_error that is no UserError ("<none>" otherwise).
template <typename F>
std::string FailureText(F&& f) {
  try {
    f();
  } catch (const UserError&) {
    return "<a UserError>";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<none>";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Lowers this process's file size limit for its lifetime, so that a write fails halfway
// (EFBIG) the way a full disk makes it fail; SIGXFSZ is ignored meanwhile.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = old_;
    lowered.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST_CASE("WriteFileAtomic writes a new file and replaces an old one") {
  TempDir dir;
  const std::string path = dir.File("out.txt");
  WriteFileAtomic(path, "first");
  CHECK(ReadAll(path) == "first");
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  WriteFileAtomic(path, "second, longer");
  CHECK(ReadAll(path) == "second, longer");
  WriteFileAtomic(path, "");
  CHECK(ReadAll(path).empty());
  CHECK(dir.Names() == std::vector<std::string>{"out.txt"});
}

TEST_CASE("WriteFileAtomic into a folder that does not exist leaves nothing behind") {
  TempDir dir;
  const std::string path = dir.File("missing/out.txt");
  CHECK(UserErrorText([&] { WriteFileAtomic(path, "x"); }) ==
        path + ": cannot write (No such file or directory)");
  CHECK(dir.Names().empty());
}

TEST_CASE("WriteFileAtomic onto a directory keeps the directory and no temporary file") {
  TempDir dir;
  const std::string path = dir.File("report.html");
  fs::create_directories(path);
  WriteFileAtomic(dir.File("report.html/kept"), "old");
  CHECK(UserErrorText([&] { WriteFileAtomic(path, "<html>"); }) ==
        path + ": cannot write (Is a directory)");
  CHECK(dir.Names() == std::vector<std::string>{"report.html"});
  CHECK(ReadAll(dir.File("report.html/kept")) == "old");
}

TEST_CASE("WriteFileAtomic leaves a FIFO (or a device) where it is") {
  // `run --out` naming a FIFO or /dev/null replaced it with a regular file.
  TempDir dir;
  const std::string path = dir.File("pipe");
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  CHECK(UserErrorText([&] { WriteFileAtomic(path, "o"); }) ==
        path + ": is not a regular file (attntune writes its outputs as files)");
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(dir.Names() == std::vector<std::string>{"pipe"});
}

TEST_CASE("WriteFileAtomic that fails halfway keeps the old content") {
  TempDir dir;
  const std::string path = dir.File("attntune_config.json");
  WriteFileAtomic(path, "old content");
  const std::string big(64 * 1024, 'x');
  {
    FileSizeLimit limit(4096);
    // A full disk or a size limit is no mistake of the user's.
    CHECK(FailureText([&] { WriteFileAtomic(path, big); }) ==
          path + ": cannot write (File too large)");
  }
  CHECK(ReadAll(path) == "old content");
  CHECK(dir.Names() == std::vector<std::string>{"attntune_config.json"});
}

TEST_CASE("WriteSafetensors over an existing file keeps it when the write fails") {
  TempDir dir;
  const std::string path = dir.File("o.safetensors");
  StFile small;
  small["o"] = MakeF32({2}, {1.0f, 2.0f});
  WriteSafetensors(path, small);
  const std::string before = ReadAll(path);
  StFile big;
  big["o"] = MakeF32({1 << 16}, std::vector<float>(1 << 16, 3.0f));
  {
    FileSizeLimit limit(4096);
    CHECK(FailureText([&] { WriteSafetensors(path, big); }) ==
          path + ": cannot write (File too large)");
  }
  CHECK(ReadAll(path) == before);
  CHECK(ReadSafetensors(path).at("o").AsF32() == std::vector<float>{1.0f, 2.0f});
  CHECK(dir.Names() == std::vector<std::string>{"o.safetensors"});
}

TEST_CASE("ReadInputFile reads within its bound and refuses past it in one line") {
  TempDir dir;
  const std::string path = dir.File("in.txt");
  { std::ofstream(path) << "0123456789"; }
  CHECK(ReadInputFile(path, 10, "a test file") == "0123456789");
  // A regular file: its size is checked before anything is read.
  CHECK(UserErrorText([&] { ReadInputFile(path, 9, "a test file"); }) ==
        path + ": holds more than attntune reads as a test file (9 bytes)");
  CHECK(UserErrorText([&] { ReadInputFile(path, 9, "a test file", ", as a test says"); }) ==
        path + ": holds more than attntune reads as a test file (9 bytes, as a test says)");
  // A device without end: read until the bound, then refused (it never ended before).
  CHECK(UserErrorText([&] { ReadInputFile("/dev/zero", 1 << 20, "a test file"); }) ==
        "/dev/zero: holds more than attntune reads as a test file (1 MiB)");
  CHECK(UserErrorText([&] { ReadInputFile(dir.Path().string(), 1 << 20, "a test file"); }) ==
        dir.Path().string() + ": is a folder, not a test file");
  CHECK(UserErrorText([&] { ReadInputFile(dir.File("none"), 1 << 20, "a test file"); }) ==
        dir.File("none") + ": cannot open (No such file or directory)");
  CHECK(PhysicalMemoryBytes() > 0);
}

}  // namespace
}  // namespace attntune
