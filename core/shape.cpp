#include "core/shape.h"

#include <algorithm>

#include <limits>
#include <map>
#include <sstream>

#include "core/check.h"
#include "core/params.h"

namespace attntune {

std::string Shape::ToString() const {
  std::ostringstream s;
  s << "B=" << B << ",Hq=" << Hq << ",Hkv=" << Hkv;
  if (Lq == Lk) {
    s << ",L=" << Lq;
  } else {
    s << ",Lq=" << Lq << ",Lk=" << Lk;
  }
  s << ",d=" << d;
  if (!causal) s << ",causal=0";
  return s.str();
}

void ValidateShape(const Shape& shape, const std::string& what) {
  const std::pair<const char*, int64_t> extents[] = {{"B", shape.B},   {"Hq", shape.Hq},
                                                     {"Hkv", shape.Hkv}, {"Lq", shape.Lq},
                                                     {"Lk", shape.Lk}, {"d", shape.d}};
  const int64_t limits[] = {kMaxBatch, kMaxHeads, kMaxHeads,
                            kMaxSequenceLength, kMaxSequenceLength, kMaxHeadDim};
  for (size_t n = 0; n < 6; ++n) {
    const auto& [name, value] = extents[n];
    if (value <= 0) {
      throw UserError(what + ": " + name + "=" + std::to_string(value) + " must be positive");
    }
    if (value > limits[n]) {
      const bool length = n == 3 || n == 4;
      throw UserError(what + ": " + name + "=" + std::to_string(value) + " is " +
                      (length ? "longer" : "more") + " than attntune takes (" +
                      std::to_string(limits[n]) + (length ? " tokens)" : ")"));
    }
  }
  if (shape.Hq % shape.Hkv != 0) {
    throw UserError(what + ": Hq=" + std::to_string(shape.Hq) + " is not divisible by Hkv=" +
                    std::to_string(shape.Hkv));
  }
  if (shape.Lq > shape.Lk) {
    throw UserError(what + ": Lq=" + std::to_string(shape.Lq) + " must not exceed Lk=" +
                    std::to_string(shape.Lk));
  }
}

int64_t ParseDecimalDigits(const std::string& text) {
  if (text.empty()) return -1;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    const int digit = c - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) return -1;
    value = value * 10 + digit;
  }
  return value;
}

int64_t ParsePositiveInt(const std::string& text, const std::string& what) {
  const int64_t value = ParseDecimalDigits(text);
  if (value <= 0) throw UserError(what + ": '" + text + "' is not a positive integer");
  return value;
}

Shape ParseShape(const std::string& text, const std::string& what) {
  static const char* const kExpected = "(expected B, Hq, Hkv, L, Lq, Lk, d, causal)";
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UserError(what + ": '" + item + "' is not key=value " + kExpected);
    }
    const std::string key = item.substr(0, eq);
    if (key != "B" && key != "Hq" && key != "Hkv" && key != "L" && key != "Lq" && key != "Lk" &&
        key != "d" && key != "causal") {
      throw UserError(what + ": unknown key '" + key + "' " + kExpected);
    }
    if (!values.emplace(key, item.substr(eq + 1)).second) {
      throw UserError(what + ": duplicate key '" + key + "'");
    }
  }
  auto get = [&](const std::string& key) -> int64_t {
    const std::string& value = values.at(key);
    const int64_t n = ParseDecimalDigits(value);
    if (n <= 0) {
      throw UserError(what + ": " + key + "='" + value + "' is not a positive integer");
    }
    return n;
  };
  auto require = [&](const std::string& key) {
    if (!values.count(key)) {
      throw UserError(what + ": missing " + key + " (e.g. B=1,Hq=16,Hkv=8,L=4096,d=128)");
    }
  };

  Shape shape;
  if (values.count("B")) shape.B = get("B");
  require("Hq");
  shape.Hq = get("Hq");
  shape.Hkv = values.count("Hkv") ? get("Hkv") : shape.Hq;
  if (values.count("L")) {
    if (values.count("Lq") || values.count("Lk")) {
      throw UserError(what + ": give either L or Lq and Lk, not both");
    }
    shape.Lq = shape.Lk = get("L");
  } else if (values.count("Lq") || values.count("Lk")) {
    require("Lq");
    require("Lk");
    shape.Lq = get("Lq");
    shape.Lk = get("Lk");
  } else {
    require("L");
  }
  require("d");
  shape.d = get("d");
  if (values.count("causal")) {
    const std::string& c = values.at("causal");
    if (c != "0" && c != "1") throw UserError(what + ": causal='" + c + "' must be 0 or 1");
    shape.causal = c == "1";
  }
  ValidateShape(shape, what);
  return shape;
}

void CheckSequenceLength(int64_t length, const std::string& what) {
  if (length > kMaxSequenceLength) {
    throw UserError(what + ": " + std::to_string(length) + " is longer than attntune takes (" +
                    std::to_string(kMaxSequenceLength) + " tokens)");
  }
}

std::vector<int64_t> ParseSeqLens(const std::string& text, const std::string& what) {
  std::vector<int64_t> lens;
  for (const auto& item : SplitList(text)) {
    const int64_t len = ParsePositiveInt(item, what);
    CheckSequenceLength(len, what);
    // Twice, a length was tuned twice (with --time-budget, two shares of the time).
    if (std::find(lens.begin(), lens.end(), len) != lens.end())
      throw UserError(what + ": " + std::to_string(len) + " is given twice");
    lens.push_back(len);
  }
  if (lens.empty()) throw UserError(what + ": no sequence length given (e.g. 1024,4096)");
  return lens;
}

}  // namespace attntune
