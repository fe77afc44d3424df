#include "parallel/wire.h"

#include <cstring>
#include <stdexcept>
#include <utility>

namespace attntune {
namespace wire {

namespace {

// The first field of every message: a message of another layout is refused, not misread.
constexpr int64_t kTaskMagic = 0x6174740131;    // "att" 1, task
constexpr int64_t kResultMagic = 0x6174740132;  // result
constexpr int64_t kHelloMagic = 0x6174740133;   // hello

void Expect(Reader& r, int64_t magic, const char* what) {
  if (r.Int() != magic) throw std::runtime_error(std::string("not a ") + what + " message");
}

}  // namespace

Writer& Writer::Int(int64_t v) {
  char raw[sizeof v];
  std::memcpy(raw, &v, sizeof v);
  bytes_.append(raw, sizeof raw);
  return *this;
}

Writer& Writer::Real(double v) {
  int64_t bits = 0;
  static_assert(sizeof bits == sizeof v, "64-bit doubles");
  std::memcpy(&bits, &v, sizeof v);
  return Int(bits);
}

Writer& Writer::Text(const std::string& v) {
  Int(static_cast<int64_t>(v.size()));
  bytes_.append(v);
  return *this;
}

void Reader::Need(size_t n) const {
  if (bytes_.size() - at_ < n) throw std::runtime_error("a message ends early");
}

int64_t Reader::Int() {
  Need(sizeof(int64_t));
  int64_t v = 0;
  std::memcpy(&v, bytes_.data() + at_, sizeof v);
  at_ += sizeof v;
  return v;
}

double Reader::Real() {
  const int64_t bits = Int();
  double v = 0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::string Reader::Text() {
  const int64_t n = Int();
  if (n < 0) throw std::runtime_error("a message holds a negative length");
  Need(static_cast<size_t>(n));
  std::string v = bytes_.substr(at_, static_cast<size_t>(n));
  at_ += static_cast<size_t>(n);
  return v;
}

void Reader::End() const {
  if (at_ != bytes_.size()) throw std::runtime_error("a message is longer than its fields");
}

std::string EncodeTask(const CandidateTask& task) {
  Writer w;
  w.Int(kTaskMagic).Int(task.ticket).Int(task.problem).Text(task.impl);
  w.Int(task.first_open_problem).Int(task.retime ? 1 : 0).Int(static_cast<int64_t>(task.params.size()));
  for (const auto& [name, value] : task.params) w.Text(name).Text(value);
  return w.Bytes();
}

CandidateTask DecodeTask(const std::string& bytes) {
  Reader r(bytes);
  Expect(r, kTaskMagic, "task");
  CandidateTask task;
  task.ticket = r.Int();
  task.problem = r.Int();
  task.impl = r.Text();
  task.first_open_problem = r.Int();
  task.retime = r.Int() != 0;
  for (int64_t i = 0, n = r.Int(); i < n; ++i) {
    std::string name = r.Text();
    task.params[name] = r.Text();
  }
  r.End();
  return task;
}

std::string EncodeResult(int64_t ticket, const TrialResult& result) {
  Writer w;
  w.Int(kResultMagic).Int(ticket).Int(static_cast<int64_t>(result.status)).Text(result.message);
  w.Text(result.started_at).Text(result.finished_at);
  w.Real(result.median_ms).Real(result.p10_ms).Real(result.p90_ms).Real(result.cv);
  w.Int(static_cast<int64_t>(result.samples_ms.size()));
  for (const double ms : result.samples_ms) w.Real(ms);
  w.Int(static_cast<int64_t>(result.metrics.size()));
  for (const auto& [name, value] : result.metrics) w.Text(name).Real(value);
  w.Int(static_cast<int64_t>(result.quality_cells.size()));
  for (const QualityCell& c : result.quality_cells)
    w.Int(c.layer).Int(c.head).Real(c.mass_recall).Real(c.rel_err);
  return w.Bytes();
}

TrialResult DecodeResult(const std::string& bytes, int64_t* ticket) {
  Reader r(bytes);
  Expect(r, kResultMagic, "result");
  *ticket = r.Int();
  TrialResult result;
  const int64_t status = r.Int();
  if (status < static_cast<int64_t>(TrialStatus::kOk) ||
      status > static_cast<int64_t>(TrialStatus::kTimeout))
    throw std::runtime_error("a result holds an unknown status");
  result.status = static_cast<TrialStatus>(status);
  result.message = r.Text();
  result.started_at = r.Text();
  result.finished_at = r.Text();
  result.median_ms = r.Real();
  result.p10_ms = r.Real();
  result.p90_ms = r.Real();
  result.cv = r.Real();
  for (int64_t i = 0, n = r.Int(); i < n; ++i) result.samples_ms.push_back(r.Real());
  for (int64_t i = 0, n = r.Int(); i < n; ++i) {
    std::string name = r.Text();
    result.metrics[name] = r.Real();
  }
  for (int64_t i = 0, n = r.Int(); i < n; ++i) {
    QualityCell c;
    c.layer = r.Int();
    c.head = r.Int();
    c.mass_recall = r.Real();
    c.rel_err = r.Real();
    result.quality_cells.push_back(c);
  }
  r.End();
  return result;
}

std::string EncodeHello(const Hello& hello) {
  Writer w;
  w.Int(kHelloMagic).Int(hello.error_code).Text(hello.error);
  w.Text(hello.device.kind).Text(hello.device.name).Text(hello.device.fingerprint_json);
  w.Int(static_cast<int64_t>(hello.device.unit_fields.size()));
  for (const std::string& field : hello.device.unit_fields) w.Text(field);
  w.Text(hello.version).Text(hello.kernel_hash).Text(hello.plan);
  return w.Bytes();
}

Hello DecodeHello(const std::string& bytes) {
  Reader r(bytes);
  Expect(r, kHelloMagic, "hello");
  Hello hello;
  hello.error_code = static_cast<int>(r.Int());
  hello.error = r.Text();
  hello.device.kind = r.Text();
  hello.device.name = r.Text();
  hello.device.fingerprint_json = r.Text();
  for (int64_t i = 0, n = r.Int(); i < n; ++i) hello.device.unit_fields.push_back(r.Text());
  hello.version = r.Text();
  hello.kernel_hash = r.Text();
  hello.plan = r.Text();
  r.End();
  return hello;
}

Hello DecodeHelloOrRefusal(const std::string& bytes) {
  try {
    return DecodeHello(bytes);
  } catch (const std::exception& e) {
    Hello refused;
    refused.error_code = 2;
    refused.error = std::string("its setup report does not decode (") + e.what() +
                    "): every rank must run the same build of attntune";
    return refused;
  }
}

}  // namespace wire
}  // namespace attntune
