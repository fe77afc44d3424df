// The database opener on mutated files: the bytes written to a temporary file, opened for
// reading (as emit, report and db info open it), its counts and trials read; then opened
// as db merge opens an input and merged into an empty database.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "db/database.h"
#include "db/merge.h"
#include "fuzz/fuzz_main.h"

void FuzzOne(const std::string& input) {
  char path[] = "/tmp/attntune_database_fuzz_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) std::abort();
  const bool written = write(fd, input.data(), input.size()) == static_cast<ssize_t>(input.size());
  close(fd);
  if (!written) std::abort();
  // Removed however the open ends (a refusal throws UserError out of this function).
  struct Remove {
    const char* path;
    ~Remove() {
      std::remove(path);
      std::remove((std::string(path) + "-wal").c_str());
      std::remove((std::string(path) + "-shm").c_str());
    }
  } remove{path};
  {
    const auto db = attntune::Database::OpenReadOnly(path);
    (void)db->Info();
    (void)db->Trials({});
  }
  const auto source = attntune::Database::OpenReadOnly(path, /*current=*/true);
  const auto into = attntune::Database::Open(":memory:");
  (void)attntune::MergeDatabase(*into, *source);
}
