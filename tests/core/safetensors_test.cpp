// safetensors I/O: round trips and the exact errors for malformed files.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/temp_dir.h"
#include "tests/user_error_text.h"
#include "core/safetensors.h"

namespace attntune {
namespace {

namespace fs = std::filesystem;


void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with header `json` (length field `len`, default its size) and `data`.
std::string RawFile(const std::string& json, const std::string& data, int64_t len = -1) {
  const uint64_t n = len < 0 ? json.size() : static_cast<uint64_t>(len);
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}


TEST_CASE("safetensors round trip of F32 and I32 tensors") {
  TempDir dir;
  const std::string path = dir.File("t.safetensors");
  StFile in;
  in["q"] = MakeF32({2, 3}, {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -7.0f});
  in["windows"] = MakeI32({3}, {0, 4096, -1});
  in["empty"] = MakeF32({0, 4}, {});
  WriteSafetensors(path, in);

  // The data starts 8-byte aligned.
  std::ifstream f(path, std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  CHECK(header_len % 8 == 0);

  const StFile out = ReadSafetensors(path);
  REQUIRE(out.size() == 3);
  CHECK(out.at("q").dtype == "F32");
  CHECK(out.at("q").shape == std::vector<int64_t>{2, 3});
  CHECK(out.at("q").AsF32() == in["q"].AsF32());
  CHECK(out.at("windows").dtype == "I32");
  CHECK(out.at("windows").AsI32() == std::vector<int32_t>{0, 4096, -1});
  CHECK(out.at("empty").shape == std::vector<int64_t>{0, 4});
  CHECK(out.at("empty").AsF32().empty());
}

TEST_CASE("safetensors reads a hand-written file with metadata and raw dtypes") {
  TempDir dir;
  const std::string path = dir.File("h.safetensors");
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},)"
      R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  const float one = 1.0f;
  std::string data(reinterpret_cast<const char*>(&one), 4);
  data += std::string("\x00\x3c\x00\x40", 4);
  WriteBytes(path, RawFile(json, data));
  const StFile st = ReadSafetensors(path);
  REQUIRE(st.size() == 2);
  CHECK(st.at("a").AsF32() == std::vector<float>{1.0f});
  CHECK(st.at("b").dtype == "F16");
  CHECK(st.at("b").bytes.size() == 4);
}

TEST_CASE("safetensors metadata round trips; a value that is not a string is refused") {
  TempDir dir;
  const std::string path = dir.File("m.safetensors");
  WriteSafetensors(path, {{"q", MakeF32({1}, {2.0f})}}, {{"model", "tiny"}, {"layers", "0,1"}});
  StMetadata metadata;
  const StFile st = ReadSafetensors(path, &metadata);
  CHECK(st.at("q").AsF32() == std::vector<float>{2.0f});
  CHECK(metadata == StMetadata{{"layers", "0,1"}, {"model", "tiny"}});
  // Without metadata the map stays empty; the reader without it still reads the file.
  WriteSafetensors(path, {{"q", MakeF32({1}, {2.0f})}});
  StMetadata none{{"stale", "x"}};
  none.clear();
  ReadSafetensors(path, &none);
  CHECK(none.empty());
  WriteBytes(path, RawFile(R"({"__metadata__":{"layers":[0,1]}})", ""));
  CHECK(UserErrorText([&] { ReadSafetensors(path); }) ==
        path + ": not a valid safetensors file (__metadata__ value 'layers' is not a string)");
  WriteBytes(path, RawFile(R"({"__metadata__":"x"})", ""));
  CHECK(UserErrorText([&] { ReadSafetensors(path); }) ==
        path + ": not a valid safetensors file (__metadata__ is not a JSON object)");
}

TEST_CASE("malformed safetensors files give one clear error") {
  TempDir dir;
  const std::string path = dir.File("bad.safetensors");
  auto read_error = [&](const std::string& bytes) {
    WriteBytes(path, bytes);
    return UserErrorText([&] { ReadSafetensors(path); });
  };
  const std::string prefix = path + ": not a valid safetensors file (";
  const std::string good_json = R"({"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  CHECK(UserErrorText([&] { ReadSafetensors(dir.File("missing.safetensors")); }) ==
        dir.File("missing.safetensors") + ": cannot open (No such file or directory)");
  CHECK(read_error("abc") == prefix + "file is 3 bytes, shorter than the 8-byte header length)");
  CHECK(read_error(RawFile(good_json, std::string(8, '\0'), 1000)) ==
        prefix + "header length 1000 exceeds the " + std::to_string(good_json.size() + 8) +
            " bytes after it)");
  CHECK(read_error(RawFile("{\"q\": [1,", "")) == prefix + "header is not valid JSON)");
  CHECK(read_error(RawFile("[1, 2]", "")) == prefix + "header is not a JSON object)");
  // Truncated data: the offsets point past the end.
  CHECK(read_error(RawFile(good_json, std::string(6, '\0'))) ==
        prefix + "tensor 'q': data_offsets [0,8] out of range (data is 6 bytes))");
  CHECK(read_error(RawFile(R"({"q":{"dtype":"F32","shape":[2],"data_offsets":[8,4]}})",
                           std::string(8, '\0'))) ==
        prefix + "tensor 'q': data_offsets [8,4] out of range (data is 8 bytes))");
  CHECK(read_error(RawFile(R"({"q":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                           std::string(8, '\0'))) ==
        prefix + "tensor 'q': data_offsets span 8 bytes but F32 [3] needs 12)");
  CHECK(read_error(RawFile(R"({"q":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}})",
                           std::string(8, '\0'))) ==
        prefix + "tensor 'q': unknown dtype 'X9')");
  CHECK(read_error(RawFile(R"({"q":{"dtype":"F32","shape":[2]}})", std::string(8, '\0'))) ==
        prefix + "tensor 'q': expected {dtype, shape, data_offsets: [begin, end]})");
  CHECK(read_error(RawFile(R"({"q":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                           std::string(8, '\0'))) ==
        prefix + "tensor 'q': shape is not a list of non-negative integers)");
  // The good file itself reads.
  WriteBytes(path, RawFile(good_json, std::string(8, '\0')));
  CHECK(ReadSafetensors(path).at("q").AsF32() == std::vector<float>{0.0f, 0.0f});
}

TEST_CASE("WriteSafetensors reports an unwritable path") {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/x.safetensors");
  CHECK(UserErrorText([&] { WriteSafetensors(path, {}); }) ==
        path + ": cannot write (No such file or directory)");
}

}  // namespace
}  // namespace attntune

namespace attntune {
namespace {

// Crafted headers (issue 24): every one is refused in one line, never a crash.
TEST_CASE("safetensors headers whose sizes overflow are refused") {
  TempDir dir;
  const std::string path = dir.File("crafted.safetensors");
  auto entry = [](const std::string& shape) {
    return "{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,0]}";
  };
  // 2^62 * 4 bytes wraps to 0 in 64 bits: the byte check must not pass.
  WriteBytes(path, RawFile("{\"q\":" + entry("[4611686018427387904,1,1,4]") + "}", ""));
  CHECK_THROWS_WITH(ReadSafetensors(path),
                    path + ": not a valid safetensors file (tensor 'q': F32 "
                           "[4611686018427387904,1,1,4] is larger than 2^63 bytes)");
  WriteBytes(path, RawFile("{\"q\":" + entry("[2147483648,2147483648,1,1]") + "}", ""));
  CHECK_THROWS_WITH(ReadSafetensors(path),
                    path + ": not a valid safetensors file (tensor 'q': F32 "
                           "[2147483648,2147483648,1,1] is larger than 2^63 bytes)");
  // 2^63 does not fit a signed extent.
  WriteBytes(path, RawFile("{\"q\":" + entry("[9223372036854775808,1,1,1]") + "}", ""));
  CHECK_THROWS_WITH(ReadSafetensors(path),
                    path + ": not a valid safetensors file (tensor 'q': extent "
                           "9223372036854775808 is larger than 2^63 - 1)");
}

TEST_CASE("safetensors headers with overlapping data or duplicate names are refused") {
  TempDir dir;
  const std::string path = dir.File("crafted.safetensors");
  const std::string data(16, '\0');
  WriteBytes(path, RawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                           data));
  CHECK_THROWS_WITH(ReadSafetensors(path),
                    path + ": not a valid safetensors file (tensors 'a' and 'b' overlap: "
                           "[0,8] and [4,12])");
  WriteBytes(path, RawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                           data));
  CHECK_THROWS_WITH(ReadSafetensors(path),
                    path + ": not a valid safetensors file (tensor 'a' is named twice)");
  // A long tensor overlapping one behind an empty one.
  WriteBytes(path, RawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                           "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                           data));
  CHECK_THROWS_WITH(ReadSafetensors(path),
                    path + ": not a valid safetensors file (tensors 'a' and 'b' overlap: "
                           "[0,16] and [8,12])");
  // Back to back and empty tensors share no byte: accepted.
  WriteBytes(path, RawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                           data));
  CHECK(ReadSafetensors(path).size() == 3);
}

TEST_CASE("a folder given as a safetensors file is refused in one line") {
  TempDir dir;
  const std::string folder = dir.File("sub");
  fs::create_directories(folder);
  CHECK_THROWS_WITH(ReadSafetensors(folder), folder + ": is a folder, not a safetensors file");
}

TEST_CASE("a safetensors file larger than a third of memory, or not a file, is refused") {
  TempDir dir;
  // A sparse file of 1 TiB: refused from its size, nothing read (it was read whole).
  const std::string big = dir.File("big.safetensors");
  { std::ofstream(big) << "x"; }
  fs::resize_file(big, uint64_t{1} << 40);
  const std::string text = UserErrorText([&] { ReadSafetensors(big); });
  CHECK(text.rfind(big + ": holds more than attntune reads as a safetensors file (", 0) == 0);
  CHECK(text.size() > 40);
  CHECK(text.substr(text.size() - 39) == " GiB, a third of this machine's memory)");
  // A device has no size to check first (/dev/zero never ended).
  CHECK(UserErrorText([&] { ReadSafetensors("/dev/zero"); }) ==
        "/dev/zero: is not a regular file (a safetensors file's size is checked before it is "
        "read)");
}

}  // namespace
}  // namespace attntune
