// The one way attntune writes a file (DESIGN.md s7: a crash, a kill or a full disk never
// leaves a half-written output, and never destroys the previous one).
#pragma once

#include <cstdint>
#include <string>

namespace attntune {

/// Writes `bytes` to `path` atomically: into a temporary file beside it, flushed, then
/// renamed over `path`. On failure the temporary file is removed, `path` keeps its old
/// content, and "<path>: cannot write (<reason>)" is thrown: std::runtime_error for a full
/// disk, a quota, a file size limit or an I/O error, UserError for anything else.
void WriteFileAtomic(const std::string& path, const std::string& bytes);

/// Refuses to let an output replace what the command reads: UserError "<output>: is
/// <what> (<input>); give another output path" when both name one existing file (through
/// any path or link). Nothing is checked when either does not exist.
void RefuseToReplace(const std::string& output, const std::string& input, const std::string& what);

/// The whole of `path`, read with a bound (DESIGN.md s7: no allocation sized by unchecked
/// input). UserError "<path>: ..." when it is a folder ("is a folder, not <noun>"), cannot
/// be opened or read, or holds more than `max_bytes` ("holds more than attntune reads as
/// <noun> (<max_bytes> in MiB or GiB<why>)"). A regular file's size is checked before
/// anything is read; a pipe or a device is read until the bound.
std::string ReadInputFile(const std::string& path, uint64_t max_bytes, const std::string& noun,
                          const std::string& why = "");

/// This machine's physical memory in bytes (0 when unknown).
double PhysicalMemoryBytes();

/// Creates `dir` and its parents if needed; "<dir>: cannot create output folder (<reason>)"
/// on failure, a std::runtime_error for a full disk, a quota or an I/O error, else UserError.
void CreateOutputFolder(const std::string& dir);

}  // namespace attntune
