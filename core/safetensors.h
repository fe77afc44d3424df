// Reading and writing safetensors files (8-byte little-endian header length, JSON
// header, raw little-endian data). attntune uses F32 and I32 tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attntune {

struct StTensor {
  std::string dtype;           // "F32", "I32", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // raw little-endian data

  std::vector<float> AsF32() const;    // CHECKs dtype == "F32"
  std::vector<int32_t> AsI32() const;  // CHECKs dtype == "I32"
};

using StFile = std::map<std::string, StTensor>;

/// The header's optional "__metadata__": a JSON object of strings (the format's rule).
using StMetadata = std::map<std::string, std::string>;

/// Reads a safetensors file; a missing file, truncated data or malformed header ->
/// UserError naming the path. `metadata`, when given, receives the "__metadata__" object
/// (empty when the file has none; a value that is not a string -> UserError).
StFile ReadSafetensors(const std::string& path, StMetadata* metadata = nullptr);

/// The tensors of a safetensors file held in `bytes` (read from `path`, named in errors);
/// the same checks as ReadSafetensors.
StFile ParseSafetensors(const std::string& bytes, const std::string& path,
                        StMetadata* metadata = nullptr);

/// Writes tensors (sorted by name) and `metadata` (omitted when empty) to `path`
/// atomically (WriteFileAtomic: a failed write keeps the old file); I/O failure ->
/// UserError "<path>: cannot write (<reason>)".
void WriteSafetensors(const std::string& path, const StFile& tensors,
                      const StMetadata& metadata = {});

StTensor MakeF32(const std::vector<int64_t>& shape, const std::vector<float>& data);
StTensor MakeI32(const std::vector<int64_t>& shape, const std::vector<int32_t>& data);

}  // namespace attntune
