#include "core/safetensors.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/files.h"
#include "core/json_text.h"

// The format stores little-endian data; attntune's hosts (x86-64, aarch64) are
// little-endian, so bytes are copied as they are.
static_assert(sizeof(float) == 4, "F32 is IEEE single precision");

namespace attntune {

namespace {

// Bytes per element of the safetensors dtypes; 0 for an unknown dtype.
int64_t DtypeSize(const std::string& dtype) {
  static const std::pair<const char*, int64_t> kSizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}};
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// The bytes of `shape` in elements of `elem_size`; false when they exceed 2^63 - 1 (a
// crafted header whose product would wrap around).
bool ByteCount(const std::vector<int64_t>& shape, int64_t elem_size, int64_t* bytes) {
  int64_t n = elem_size;
  for (int64_t e : shape) {
    if (__builtin_mul_overflow(n, e, &n)) return false;
  }
  *bytes = n;
  return true;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

class Invalid {
 public:
  explicit Invalid(const std::string& path) : path_(path) {}
  [[noreturn]] void operator()(const std::string& reason) const {
    throw UserError(path_ + ": not a valid safetensors file (" + reason + ")");
  }

 private:
  std::string path_;
};

StTensor ParseEntry(const std::string& name, const nlohmann::json& entry, uint64_t data_size,
                    const uint8_t* data, const Invalid& invalid) {
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
      !entry.contains("shape") || !entry["shape"].is_array() || !entry.contains("data_offsets") ||
      !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
    invalid(where + "expected {dtype, shape, data_offsets: [begin, end]}");
  }
  StTensor t;
  t.dtype = entry["dtype"].get<std::string>();
  const int64_t elem_size = DtypeSize(t.dtype);
  if (elem_size == 0) invalid(where + "unknown dtype '" + t.dtype + "'");
  for (const nlohmann::json& e : entry["shape"]) {
    if (!e.is_number_unsigned()) invalid(where + "shape is not a list of non-negative integers");
    const uint64_t extent = e.get<uint64_t>();
    if (extent > static_cast<uint64_t>(INT64_MAX)) {
      invalid(where + "extent " + std::to_string(extent) + " is larger than 2^63 - 1");
    }
    t.shape.push_back(static_cast<int64_t>(extent));
  }
  int64_t needed = 0;
  if (!ByteCount(t.shape, elem_size, &needed)) {
    invalid(where + t.dtype + " " + ShapeText(t.shape) + " is larger than 2^63 bytes");
  }
  const nlohmann::json& off = entry["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
    invalid(where + "data_offsets are not non-negative integers");
  }
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    invalid(where + "data_offsets [" + std::to_string(begin) + "," + std::to_string(end) +
            "] out of range (data is " + std::to_string(data_size) + " bytes)");
  }
  const uint64_t expected = static_cast<uint64_t>(needed);
  if (end - begin != expected) {
    invalid(where + "data_offsets span " + std::to_string(end - begin) + " bytes but " +
            t.dtype + " " + ShapeText(t.shape) + " needs " + std::to_string(expected));
  }
  t.bytes.assign(data + begin, data + end);
  return t;
}

}  // namespace

std::vector<float> StTensor::AsF32() const {
  ATTNTUNE_CHECK_MSG(dtype == "F32", "tensor dtype is " + dtype);
  ATTNTUNE_CHECK(bytes.size() % sizeof(float) == 0);
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<int32_t> StTensor::AsI32() const {
  ATTNTUNE_CHECK_MSG(dtype == "I32", "tensor dtype is " + dtype);
  ATTNTUNE_CHECK(bytes.size() % sizeof(int32_t) == 0);
  std::vector<int32_t> out(bytes.size() / sizeof(int32_t));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

StFile ReadSafetensors(const std::string& path, StMetadata* metadata) {
  // Read whole: the file, its tensors' bytes and their fp32 copies are held at once, so a
  // file may take a third of this machine's memory (all of it when that is unknown).
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) &&
      !std::filesystem::is_directory(status)) {
    throw UserError(path + ": is not a regular file (a safetensors file's size is checked "
                    "before it is read)");
  }
  const double memory = PhysicalMemoryBytes();
  const uint64_t limit = memory > 0 ? static_cast<uint64_t>(memory / 3) : UINT64_MAX;
  const std::string bytes = ReadInputFile(path, limit, "a safetensors file",
                                          ", a third of this machine's memory");
  return ParseSafetensors(bytes, path, metadata);
}

StFile ParseSafetensors(const std::string& bytes, const std::string& path, StMetadata* metadata) {
  const auto* file = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint64_t size = bytes.size();
  const Invalid invalid(path);
  if (size < 8) {
    invalid("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file[i];
  const uint64_t rest = size - 8;
  if (header_len > rest) {
    invalid("header length " + std::to_string(header_len) + " exceeds the " +
            std::to_string(rest) + " bytes after it");
  }
  const std::string header_text(bytes, 8, header_len);
  // The parser keeps the last of two equal keys; a name given twice is refused instead.
  std::set<std::string> names;
  std::string twice;
  const nlohmann::json::parser_callback_t note_names =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (depth == 1 && event == nlohmann::json::parse_event_t::key && twice.empty() &&
            !names.insert(parsed.get<std::string>()).second) {
          twice = parsed.get<std::string>();
        }
        return true;
      };
  const nlohmann::json header = nlohmann::json::parse(header_text, note_names, false);
  if (header.is_discarded()) invalid("header is not valid JSON");
  if (!twice.empty()) invalid("tensor '" + twice + "' is named twice");
  if (!header.is_object()) invalid("header is not a JSON object");
  const uint8_t* data = file + 8 + header_len;
  const uint64_t data_size = rest - header_len;
  StFile tensors;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;  // [begin, end), name
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) invalid("__metadata__ is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) invalid("__metadata__ value '" + key + "' is not a string");
        if (metadata != nullptr) (*metadata)[key] = value.get<std::string>();
      }
      continue;
    }
    tensors[name] = ParseEntry(name, entry, data_size, data, invalid);
    const nlohmann::json& off = entry["data_offsets"];
    spans.emplace_back(off[0].get<uint64_t>(), off[1].get<uint64_t>(), name);
  }
  // No byte belongs to two tensors (empty tensors hold none): each non-empty span starts
  // at or after the furthest end of those before it.
  std::sort(spans.begin(), spans.end());
  const std::tuple<uint64_t, uint64_t, std::string>* furthest = nullptr;
  for (const auto& span : spans) {
    const auto& [begin, end, name] = span;
    if (begin == end) continue;
    if (furthest != nullptr && begin < std::get<1>(*furthest)) {
      const auto& [b0, e0, other] = *furthest;
      invalid("tensors '" + other + "' and '" + name + "' overlap: [" + std::to_string(b0) + "," +
              std::to_string(e0) + "] and [" + std::to_string(begin) + "," +
              std::to_string(end) + "]");
    }
    if (furthest == nullptr || end > std::get<1>(*furthest)) furthest = &span;
  }
  return tensors;
}

void WriteSafetensors(const std::string& path, const StFile& tensors, const StMetadata& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ATTNTUNE_CHECK_MSG(DtypeSize(t.dtype) != 0, "unknown dtype " + t.dtype);
    ATTNTUNE_CHECK_MSG(static_cast<uint64_t>(Elements(t.shape) * DtypeSize(t.dtype)) == t.bytes.size(),
              "tensor " + name + " has the wrong byte count for its shape");
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = JsonText(header);
  // Pad with spaces so that the data starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));

  // Assembled in memory and written in one step, so that an existing file is replaced
  // whole or kept (never truncated by a failed write).
  std::string bytes(reinterpret_cast<const char*>(len), 8);
  bytes += text;
  for (const auto& [name, t] : tensors)
    bytes.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  WriteFileAtomic(path, bytes);
}

StTensor MakeF32(const std::vector<int64_t>& shape, const std::vector<float>& data) {
  ATTNTUNE_CHECK(Elements(shape) == static_cast<int64_t>(data.size()));
  StTensor t;
  t.dtype = "F32";
  t.shape = shape;
  t.bytes.resize(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(t.bytes.data(), data.data(), t.bytes.size());
  return t;
}

StTensor MakeI32(const std::vector<int64_t>& shape, const std::vector<int32_t>& data) {
  ATTNTUNE_CHECK(Elements(shape) == static_cast<int64_t>(data.size()));
  StTensor t;
  t.dtype = "I32";
  t.shape = shape;
  t.bytes.resize(data.size() * sizeof(int32_t));
  if (!data.empty()) std::memcpy(t.bytes.data(), data.data(), t.bytes.size());
  return t;
}

}  // namespace attntune
