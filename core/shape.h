// Problem shapes (DESIGN.md s1): Q[B,Hq,Lq,d], K,V[B,Hkv,Lk,d], row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attntune {

struct Shape {
  int64_t B = 1;
  int64_t Hq = 1;
  int64_t Hkv = 1;
  int64_t Lq = 1;
  int64_t Lk = 1;
  int64_t d = 64;
  bool causal = true;

  /// GQA group size g = Hq / Hkv; query head h reads KV head h / g.
  int64_t Group() const { return Hq / Hkv; }
  /// Absolute position p(i) = Lk - Lq + i of query row i.
  int64_t QueryPos(int64_t i) const { return Lk - Lq + i; }
  int64_t QElems() const { return B * Hq * Lq * d; }
  int64_t KvElems() const { return B * Hkv * Lk * d; }
  /// "B=1,Hq=16,Hkv=8,Lq=4096,Lk=4096,d=128" (L=... when Lq == Lk).
  std::string ToString() const;
  bool operator==(const Shape& o) const {
    return B == o.B && Hq == o.Hq && Hkv == o.Hkv && Lq == o.Lq && Lk == o.Lk && d == o.d &&
           causal == o.causal;
  }
};

/// The largest extents attntune takes (docs/reliability.md "Limits"): a model's heads and
/// head dim as config.json's bounds (tuner/model.cpp), 2^24 tokens of sequence, 2^16
/// sequences. Together they keep every element count below 2^60 and every pair count of
/// one head below 2^48, so no count overflows int64.
constexpr int64_t kMaxBatch = int64_t{1} << 16;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxSequenceLength = int64_t{1} << 24;  // 16777216 tokens

/// Throws UserError (naming `what`, e.g. "--shape") unless every extent is positive and
/// at most its limit above, Hq is divisible by Hkv and Lq <= Lk.
void ValidateShape(const Shape& shape, const std::string& what);

/// UserError "<what>: <length> is longer than attntune takes (16777216 tokens)" for a
/// length above kMaxSequenceLength (a positive one is assumed).
void CheckSequenceLength(int64_t length, const std::string& what);

/// Parses "B=1,Hq=16,Hkv=8,L=4096,d=128" (L sets Lq and Lk; Lq=, Lk=, causal=0|1
/// also accepted; B defaults to 1). Throws UserError naming `what` on bad input.
Shape ParseShape(const std::string& text, const std::string& what);

/// Decimal digits only (no sign, no space, no "0x") whose value fits int64; -1 otherwise.
int64_t ParseDecimalDigits(const std::string& text);

/// Parses a positive integer; throws UserError "<what>: '<text>' is not a positive integer".
int64_t ParsePositiveInt(const std::string& text, const std::string& what);

/// Comma-separated positive integers ("1024,4096"), each at most kMaxSequenceLength;
/// UserError naming `what` for a bad item, or "<what>: no sequence length given (e.g.
/// 1024,4096)" for none.
std::vector<int64_t> ParseSeqLens(const std::string& text, const std::string& what);

}  // namespace attntune
