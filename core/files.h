// The one way attntune writes a file (DESIGN.md s7: a crash, a kill or a full disk never
// leaves a half-written output, and never destroys the previous one).
#pragma once

#include <string>

namespace attntune {

/// Writes `bytes` to `path` atomically: into a temporary file beside it, flushed, then
/// renamed over `path`. On failure the temporary file is removed, `path` keeps its old
/// content, and "<path>: cannot write (<reason>)" is thrown: std::runtime_error for a full
/// disk, a quota, a file size limit or an I/O error, UserError for anything else.
void WriteFileAtomic(const std::string& path, const std::string& bytes);

/// Creates `dir` and its parents if needed; "<dir>: cannot create output folder (<reason>)"
/// on failure, a std::runtime_error for a full disk, a quota or an I/O error, else UserError.
void CreateOutputFolder(const std::string& dir);

}  // namespace attntune
