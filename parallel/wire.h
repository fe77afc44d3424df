// The messages between the ranks of an MPI tune, as bytes: a candidate to evaluate, its
// result, and a rank's report of its device at the start. Plain C++ (no MPI), so that
// the encoding is tested in every build. Doubles travel as their bits: a NaN, an
// infinity and every sample arrive as they were measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/records.h"
#include "profiler/device.h"
#include "tuner/pool.h"

namespace attntune {
namespace wire {

/// What a rank reports to rank 0 once its own setup is done.
struct Hello {
  /// 0: set up; 2: the user's mistake (`error` is the UserError's text); 1: a failure.
  int error_code = 0;
  std::string error;
  DeviceInfo device;
  std::string version;      // attntune version
  std::string kernel_hash;  // a hash of the kernel sources: ranks must run the same build
  std::string plan;         // what makes the tune's problems and candidates: ranks agree
};

std::string EncodeTask(const CandidateTask& task);
CandidateTask DecodeTask(const std::string& bytes);

std::string EncodeResult(int64_t ticket, const TrialResult& result);
TrialResult DecodeResult(const std::string& bytes, int64_t* ticket);

std::string EncodeHello(const Hello& hello);
Hello DecodeHello(const std::string& bytes);
/// DecodeHello, or where the bytes do not decode (a rank of another build whose report has
/// other fields) a Hello of error_code 2 saying so: rank 0 then stops every rank with that
/// line instead of failing alone while the others wait for its word.
Hello DecodeHelloOrRefusal(const std::string& bytes);

/// A message that does not decode (a rank of another build, or damage in transit):
/// std::runtime_error naming what was being read.
class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  int64_t Int();
  double Real();
  std::string Text();
  /// Throws when bytes are left: a message is read whole.
  void End() const;

 private:
  void Need(size_t n) const;
  const std::string& bytes_;
  size_t at_ = 0;
};

class Writer {
 public:
  Writer& Int(int64_t v);
  Writer& Real(double v);
  Writer& Text(const std::string& v);
  const std::string& Bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace wire
}  // namespace attntune
