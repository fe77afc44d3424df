// The messages between ranks (parallel/wire) and the hand-over to the evaluating thread
// (parallel/task_queue): built and tested with or without MPI.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <thread>

#include "parallel/task_queue.h"
#include "parallel/wire.h"

using namespace attntune;

TEST_CASE("A task travels whole") {
  CandidateTask task;
  task.ticket = 1234567890123;
  task.problem = 7;
  task.impl = "tiled";
  task.params = {{"Br", "32"}, {"w", "256"}, {"rule", ""}, {"note", std::string("a\0b", 3)}};
  task.first_open_problem = 5;
  task.retime = true;
  const CandidateTask back = wire::DecodeTask(wire::EncodeTask(task));
  CHECK(back.ticket == task.ticket);
  CHECK(back.problem == 7);
  CHECK(back.impl == "tiled");
  CHECK(back.params == task.params);
  CHECK(back.first_open_problem == 5);
  CHECK(back.retime);
}

TEST_CASE("A result travels bit for bit: NaN, infinities, signed zero, every sample and quality cell") {
  TrialResult r;
  r.status = TrialStatus::kWrongResult;
  r.message = "max rel err 3e-2 > 1e-5 (row 17)";
  r.started_at = "2026-11-25T10:00:00Z";
  r.finished_at = "2026-11-25T10:00:01Z";
  r.median_ms = 0.125;
  r.p10_ms = std::numeric_limits<double>::quiet_NaN();
  r.p90_ms = std::numeric_limits<double>::infinity();
  r.cv = -0.0;
  for (int i = 0; i < 1000; ++i) r.samples_ms.push_back(1.0 / (i + 3));
  r.metrics = {{"rel_err", 1e-300}, {"gflops", -std::numeric_limits<double>::infinity()},
               {"mass_recall", std::nextafter(1.0, 0.0)}};
  // A calibrated trial's per (layer, head) quality: a rank's result lost them, so a tune
  // on several ranks stored the cells of rank 0's trials only.
  r.quality_cells = {{0, 0, 0.99, 1e-3}, {0, 3, 0.5, 0.25}, {27, 15, 1.0, 0.0}};
  int64_t ticket = 0;
  const TrialResult back = wire::DecodeResult(wire::EncodeResult(99, r), &ticket);
  CHECK(ticket == 99);
  CHECK(back.status == TrialStatus::kWrongResult);
  CHECK(back.message == r.message);
  CHECK(back.started_at == r.started_at);
  CHECK(back.finished_at == r.finished_at);
  CHECK(back.median_ms == 0.125);
  CHECK(std::isnan(back.p10_ms));
  CHECK(back.p90_ms == std::numeric_limits<double>::infinity());
  CHECK(std::signbit(back.cv));
  CHECK(back.samples_ms == r.samples_ms);
  CHECK(back.metrics == r.metrics);
  REQUIRE(back.quality_cells.size() == r.quality_cells.size());
  for (size_t i = 0; i < r.quality_cells.size(); ++i) {
    CHECK(back.quality_cells[i].layer == r.quality_cells[i].layer);
    CHECK(back.quality_cells[i].head == r.quality_cells[i].head);
    CHECK(back.quality_cells[i].mass_recall == r.quality_cells[i].mass_recall);
    CHECK(back.quality_cells[i].rel_err == r.quality_cells[i].rel_err);
  }
}

TEST_CASE("A rank's report travels whole") {
  wire::Hello h;
  h.error_code = 2;
  h.error = "--device cuda:local -> cuda:3: no CUDA device 3";
  h.device = {"cuda", "NVIDIA H100", R"({"uuid":"GPU-1"})", {"uuid", "pci_bus_id"}};
  h.version = "0.1.0";
  h.kernel_hash = "abc123";
  const wire::Hello back = wire::DecodeHello(wire::EncodeHello(h));
  CHECK(back.error_code == 2);
  CHECK(back.error == h.error);
  CHECK(back.device.fingerprint_json == h.device.fingerprint_json);
  CHECK(back.device.unit_fields == h.device.unit_fields);
  CHECK(back.version == "0.1.0");
  CHECK(back.kernel_hash == "abc123");
}

TEST_CASE("A report that does not decode is a refusal rank 0 passes on to every rank") {
  wire::Hello h;
  h.version = "0.1.0";
  h.plan = "p";
  const std::string bytes = wire::EncodeHello(h);
  const wire::Hello good = wire::DecodeHelloOrRefusal(bytes);
  CHECK(good.error_code == 0);
  CHECK(good.plan == "p");
  // A later build's report with one more field: rank 0 threw out of its setup while the
  // other ranks waited for its word.
  wire::Writer longer;
  longer.Int(7);
  const wire::Hello refused = wire::DecodeHelloOrRefusal(bytes + longer.Bytes());
  CHECK(refused.error_code == 2);
  CHECK(refused.error ==
        "its setup report does not decode (a message is longer than its fields): every rank "
        "must run the same build of attntune");
  CHECK(wire::DecodeHelloOrRefusal("").error_code == 2);
}

TEST_CASE("A message cut short, of another kind or with bytes to spare is refused") {
  CandidateTask task;
  task.impl = "generic";
  const std::string bytes = wire::EncodeTask(task);
  CHECK_THROWS_WITH(wire::DecodeTask(bytes.substr(0, bytes.size() - 1)), "a message ends early");
  CHECK_THROWS_WITH(wire::DecodeTask(bytes + "x"), "a message is longer than its fields");
  CHECK_THROWS_WITH(wire::DecodeTask(wire::EncodeResult(1, TrialResult{})), "not a task message");
  int64_t ticket = 0;
  CHECK_THROWS_WITH(wire::DecodeResult(bytes, &ticket), "not a result message");
  CHECK_THROWS_WITH(wire::DecodeHello(""), "a message ends early");
  // A length that runs past the end.
  wire::Writer w;
  w.Int(0x6174740131).Int(1).Int(2).Int(1000);
  CHECK_THROWS_WITH(wire::DecodeTask(w.Bytes()), "a message ends early");
}

TEST_CASE("The task queue hands tasks to another thread and outcomes back; closing ends it") {
  TaskQueue queue;
  std::vector<int64_t> seen;
  std::thread evaluator([&] {
    while (std::optional<CandidateTask> t = queue.Next()) {
      seen.push_back(t->ticket);
      TaskQueue::Outcome o;
      o.ticket = t->ticket;
      o.result.median_ms = static_cast<double>(t->ticket);
      queue.Finish(std::move(o));
    }
  });
  for (int64_t i = 1; i <= 5; ++i) {
    CandidateTask t;
    t.ticket = i;
    queue.Push(t);
  }
  std::vector<int64_t> answered;
  while (answered.size() < 5) {
    if (std::optional<TaskQueue::Outcome> o = queue.TakeOutcome()) {
      CHECK(o->result.median_ms == static_cast<double>(o->ticket));
      answered.push_back(o->ticket);
    }
  }
  queue.Close();
  evaluator.join();
  CHECK(seen == std::vector<int64_t>{1, 2, 3, 4, 5});
  CHECK(answered == seen);
  CHECK_FALSE(queue.TakeOutcome());
}
