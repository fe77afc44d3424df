// RankJob over MPI. Messages are point-to-point between rank 0 and each other rank; no
// call blocks waiting for a peer (probes with short sleeps), so that an idle rank takes
// no CPU from ranks that measure on the same cores, and a rank that dies is noticed: a
// rank on rank 0's host by its pid, any rank by its silence (every rank sends at least
// a heartbeat a second). Only one thread of a process calls MPI at a time
// (MPI_THREAD_SERIALIZED): rank 0's coordinator thread, a worker's comm thread.
#include <mpi.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "build_info.h"
#include "core/check.h"
#include "core/error.h"
#include "parallel/ranks.h"
#include "parallel/task_queue.h"
#include "parallel/wire.h"

namespace attntune {
namespace {

enum Tag : int {
  kTagHello = 1,      // rank -> 0: wire::Hello
  kTagStart = 2,      // 0 -> rank: "0" to go, else the exit code to stop with
  kTagTask = 3,       // 0 -> rank: wire task
  kTagResult = 4,     // rank -> 0: wire result
  kTagHeartbeat = 5,  // both ways: nothing
  kTagStop = 6,       // 0 -> rank: no more tasks; "1" when a rank was lost (no MPI_Finalize)
  kTagFailed = 7,     // rank -> 0: its evaluation failed (text); it stops
};

// Every rank sends something at least this often (a heartbeat when it has nothing else).
constexpr double kHeartbeatSeconds = 1.0;
// A rank silent this long is taken for gone: far above a heartbeat's period on a loaded
// node; a rank on rank 0's host is noticed sooner, by its pid.
constexpr double kSilentSeconds = 30.0;
// How long rank 0 waits for a rank's report of its setup (CUDA initialisation, the
// model's geometry) before giving up on it.
constexpr double kSetupSeconds = 600.0;
// How often a process looks at its peers' pids (a kill(pid, 0) each).
constexpr double kPidCheckSeconds = 0.1;
// The sleeps of an idle poll: from the shortest, doubling while nothing arrives, up to
// the longest; back to the shortest on a message. A message waits at most the longest
// (far below a candidate's time), and an idle rank wakes 200 times a second at most: a
// poll every 0.5 ms on every rank's thread slowed ranks measuring on the same cores.
constexpr std::chrono::microseconds kShortestSleep{50};
constexpr std::chrono::microseconds kLongestSleep{5000};
// The sleep of the start's polls (the ranks' setup takes seconds).
constexpr std::chrono::milliseconds kStartSleep{10};

// The sleeps of one polling loop (see kShortestSleep).
class Backoff {
 public:
  void Sleep() {
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, kLongestSleep);
  }
  void Reset() { sleep_ = kShortestSleep; }

 private:
  std::chrono::microseconds sleep_ = kShortestSleep;
};
// Host names are compared, not printed whole.
constexpr int kHostBytes = 64;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw std::runtime_error(std::string("MPI: ") + what + ": " + std::string(text, n));
}

void Send(int dest, Tag tag, const std::string& bytes) {
  Check(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag,
                 MPI_COMM_WORLD),
        "MPI_Send");
}

struct Message {
  int from = 0;
  int tag = 0;
  std::string bytes;
};

// A message from `source` (MPI_ANY_SOURCE: any), if one has arrived.
std::optional<Message> Poll(int source) {
  int flag = 0;
  MPI_Status status;
  Check(MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
  if (!flag) return std::nullopt;
  int count = 0;
  Check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  Message m;
  m.from = status.MPI_SOURCE;
  m.tag = status.MPI_TAG;
  m.bytes.resize(static_cast<size_t>(count));
  Check(MPI_Recv(&m.bytes[0], count, MPI_BYTE, m.from, m.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv");
  return m;
}

// Where a rank runs, exchanged by every rank at the start.
struct Place {
  int pid = 0;
  char host[kHostBytes] = {};
};

// A peer rank as one process sees it.
struct Peer {
  Place place;
  double last_heard = 0;
  double last_sent = 0;
  bool lost = false;

  std::string Describe(int rank) const {
    return "rank " + std::to_string(rank) + " (pid " + std::to_string(place.pid) + " on " +
           place.host + ")";
  }
};

// Whether the process of `pid` on this host has ended (a zombie counts as ended).
bool PidGone(int pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char state = '?';
  const int read = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return read == 1 && state == 'Z';
}

// A worker's message to rank 0, sent without waiting on it for ever: MPI_Send of a
// message past the eager size (a result with its samples, the setup report) returns only
// once the receiver takes it, and a dead rank 0 (mpirun --enable-recovery keeps the other
// ranks running) never does. Returns "" once sent, else why rank 0 is taken for gone: its
// pid gone on this host, or the message not taken in kSilentSeconds (a live rank 0 polls
// for messages all the time). An abandoned send's bytes are left allocated: the rank
// ends without MPI_Finalize, and MPI may still read them until it does.
std::string SendToRoot(Tag tag, const std::string& bytes, const Peer& root, bool same_host) {
  auto* buffer = new std::string(bytes);
  MPI_Request request;
  Check(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, 0, tag,
                  MPI_COMM_WORLD, &request),
        "MPI_Isend");
  const double start = Now();
  double last_pid_check = 0;
  Backoff backoff;
  for (;;) {
    int done = 0;
    Check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) {
      delete buffer;
      return "";
    }
    const double now = Now();
    if (same_host && now - last_pid_check >= kPidCheckSeconds) {
      last_pid_check = now;
      if (PidGone(root.place.pid)) return root.Describe(0) + " is gone";
    }
    if (now - start > kSilentSeconds)
      return root.Describe(0) + " took no message for " +
             std::to_string(static_cast<int>(kSilentSeconds)) + " s";
    backoff.Sleep();
  }
}

// "seq_lens [64] against [64,128]" for each option in which two plans (JSON objects)
// differ.
std::string PlanDifference(const std::string& plan, const std::string& root) {
  const nlohmann::json a = nlohmann::json::parse(plan, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(root, nullptr, false);
  if (!a.is_object() || !b.is_object()) return plan + " against " + root;
  std::string out;
  auto add = [&](const std::string& key) {
    const std::string mine = a.contains(key) ? a[key].dump() : "nothing";
    const std::string theirs = b.contains(key) ? b[key].dump() : "nothing";
    if (mine != theirs) out += (out.empty() ? "" : ", ") + key + " " + mine + " against " + theirs;
  };
  for (const auto& [key, value] : a.items()) add(key);
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) add(key);
  }
  return out;
}

class MpiJob;

// Rank 0's slots: itself (slot 0, its main thread through `local`) and every other rank.
class MpiPool : public WorkerPool {
 public:
  MpiPool(MpiJob& job, TaskQueue& local);
  int Slots() const override;
  DeviceInfo Device(int slot) const override;
  std::string Name(int slot) const override { return "rank " + std::to_string(slot); }
  void Submit(int slot, const CandidateTask& task) override;
  std::optional<PoolEvent> Wait(double max_seconds) override;
  /// Tells every rank still there to stop, and the local evaluator.
  void Stop();

 private:
  std::optional<PoolEvent> Receive(const Message& m);
  std::optional<PoolEvent> Lose(int rank, const std::string& why);
  std::optional<PoolEvent> CheckPeers(double now);

  MpiJob& job_;
  TaskQueue& local_;
  std::vector<int64_t> ticket_;  // by rank: the task in flight, 0 none
  double last_pid_check_ = 0;
};

class MpiJob : public RankJob {
 public:
  MpiJob();
  ~MpiJob() override;
  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  int LocalRank() const override { return local_rank_; }
  void Start(int error_code, const std::string& error, const DeviceInfo& device,
             const std::string& plan) override;
  TuneSummary Coordinate(TunePlan& plan, CandidateRunner& runner,
                         const ProgressFn& progress) override;
  void Serve(CandidateRunner& runner) override;

  std::vector<Peer>& Peers() { return peers_; }
  /// A rank is gone: MPI_Finalize would wait for it, so this process ends without it.
  void SkipFinalize() { finalize_ = false; }
  bool Finalizes() const { return finalize_; }
  const std::vector<wire::Hello>& Hellos() const { return hellos_; }
  bool SameHost(int rank) const {
    return std::strncmp(peers_[static_cast<size_t>(rank)].place.host,
                        peers_[static_cast<size_t>(rank_)].place.host, kHostBytes) == 0;
  }

 private:
  void StartRoot(wire::Hello own);
  void StartWorker(const wire::Hello& own);
  std::string CommLoop(TaskQueue& queue);

  int rank_ = 0, size_ = 1, local_rank_ = 0;
  bool finalize_ = true;
  std::vector<Peer> peers_;
  std::vector<wire::Hello> hellos_;  // rank 0: every rank's
};

MpiJob::MpiJob() {
  int provided = 0;
  Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_SERIALIZED)
    throw std::runtime_error("MPI: this MPI library gives no MPI_THREAD_SERIALIZED");
  Check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  Check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm node;
  Check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  Check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
  MPI_Comm_free(&node);
  Place own;
  own.pid = static_cast<int>(getpid());
  gethostname(own.host, kHostBytes - 1);
  std::vector<Place> places(static_cast<size_t>(size_));
  Check(MPI_Allgather(&own, sizeof own, MPI_BYTE, places.data(), sizeof own, MPI_BYTE,
                      MPI_COMM_WORLD),
        "MPI_Allgather");
  const double now = Now();
  for (const Place& p : places) peers_.push_back(Peer{p, now, now, false});
}

// MPI_Finalize waits for every rank, a dead one too (Open MPI under --enable-recovery
// hangs there): once a rank is gone, the others end without it; the launcher that kept
// the job alive accepts that.
MpiJob::~MpiJob() {
  if (finalize_) MPI_Finalize();
}

void MpiJob::Start(int error_code, const std::string& error, const DeviceInfo& device,
                   const std::string& plan) {
  wire::Hello own;
  own.plan = plan;
  own.error_code = error_code;
  own.error = error;
  own.device = device;
  own.version = ATTNTUNE_VERSION;
  own.kernel_hash = ATTNTUNE_KERNEL_HASH;
  if (rank_ == 0) {
    StartRoot(std::move(own));
  } else {
    StartWorker(own);
  }
}

// Rank 0: every rank's report, then "go" to all, or the first error to all and thrown.
void MpiJob::StartRoot(wire::Hello own) {
  hellos_.assign(static_cast<size_t>(size_), wire::Hello{});
  std::vector<bool> heard(static_cast<size_t>(size_), false);
  hellos_[0] = std::move(own);
  heard[0] = true;
  std::string gone;  // a rank that ended or never reported
  const double start = Now();
  for (int missing = size_ - 1; missing > 0 && gone.empty();) {
    if (std::optional<Message> m = Poll(MPI_ANY_SOURCE)) {
      if (m->tag != kTagHello || heard[static_cast<size_t>(m->from)]) continue;
      hellos_[static_cast<size_t>(m->from)] = wire::DecodeHelloOrRefusal(m->bytes);
      heard[static_cast<size_t>(m->from)] = true;
      --missing;
      continue;
    }
    for (int r = 1; r < size_ && gone.empty(); ++r) {
      if (heard[static_cast<size_t>(r)]) continue;
      const Peer& p = peers_[static_cast<size_t>(r)];
      if (SameHost(r) && PidGone(p.place.pid)) gone = p.Describe(r) + " ended before it was set up";
      if (Now() - start > kSetupSeconds)
        gone = p.Describe(r) + " did not report its setup in " +
               std::to_string(static_cast<int>(kSetupSeconds)) + " s";
    }
    std::this_thread::sleep_for(kStartSleep);
  }
  // The first error: rank 0's own, then by rank; then a rank of another build.
  int code = 0;
  std::string error;
  for (int r = 0; r < size_ && code == 0; ++r) {
    const wire::Hello& h = hellos_[static_cast<size_t>(r)];
    if (!heard[static_cast<size_t>(r)] || h.error_code == 0) continue;
    code = h.error_code;
    error = r == 0 ? h.error : "rank " + std::to_string(r) + ": " + h.error;
  }
  if (!gone.empty()) SkipFinalize();
  if (code == 0 && !gone.empty()) {
    code = 1;
    error = gone;
  }
  for (int r = 1; r < size_ && code == 0; ++r) {
    const wire::Hello& h = hellos_[static_cast<size_t>(r)];
    if (h.version == hellos_[0].version && h.kernel_hash == hellos_[0].kernel_hash) continue;
    code = 2;
    error = "rank " + std::to_string(r) + " runs attntune " + h.version + " (kernels " +
            h.kernel_hash + "), rank 0 attntune " + hellos_[0].version + " (kernels " +
            hellos_[0].kernel_hash + "): every rank must run the same build";
  }
  for (int r = 1; r < size_ && code == 0; ++r) {
    if (hellos_[static_cast<size_t>(r)].plan == hellos_[0].plan) continue;
    code = 2;
    error = "rank " + std::to_string(r) + " was started with another tune than rank 0 (" +
            PlanDifference(hellos_[static_cast<size_t>(r)].plan, hellos_[0].plan) +
            "): every rank runs the same command";
  }
  for (int r = 1; r < size_; ++r) {
    if (heard[static_cast<size_t>(r)]) Send(r, kTagStart, std::to_string(code));
  }
  const double now = Now();
  for (Peer& p : peers_) p.last_heard = p.last_sent = now;
  if (code == 2) throw UserError(error);
  if (code != 0) throw std::runtime_error(error);
}

// Another rank: its report to rank 0, then rank 0's word to go or stop.
void MpiJob::StartWorker(const wire::Hello& own) {
  const Peer& root = peers_[0];
  const std::string unsent = SendToRoot(kTagHello, wire::EncodeHello(own), root, SameHost(0));
  if (!unsent.empty()) {
    SkipFinalize();
    throw std::runtime_error(unsent + " before the tune started");
  }
  for (;;) {
    if (std::optional<Message> m = Poll(0)) {
      if (m->tag != kTagStart) continue;
      const int code = std::atoi(m->bytes.c_str());
      if (code != 0) throw RankStopped{code};
      break;
    }
    if (SameHost(0) && PidGone(root.place.pid)) {
      SkipFinalize();
      throw std::runtime_error(root.Describe(0) + " ended before the tune started");
    }
    std::this_thread::sleep_for(kStartSleep);
  }
  const double now = Now();
  for (Peer& p : peers_) p.last_heard = p.last_sent = now;
}

TuneSummary MpiJob::Coordinate(TunePlan& plan, CandidateRunner& runner,
                               const ProgressFn& progress) {
  ATTNTUNE_CHECK(rank_ == 0);
  TaskQueue local;
  MpiPool pool(*this, local);
  TuneSummary summary;
  std::exception_ptr error;
  std::thread coordinator([&] {
    try {
      summary = RunTune(plan, pool, progress);
    } catch (...) {
      error = std::current_exception();
    }
    try {
      pool.Stop();
    } catch (...) {  // the tune's own outcome is what counts
    }
  });
  // This rank's candidates, on this thread (which holds its device). A failure here is
  // reported to the coordinator as this rank's slot lost; it goes on with the others.
  ServeTasks(local, runner);
  coordinator.join();
  if (error) std::rethrow_exception(error);
  return summary;
}

void MpiJob::Serve(CandidateRunner& runner) {
  ATTNTUNE_CHECK(rank_ != 0);
  TaskQueue queue;
  std::string stopped;
  std::thread comm([&] { stopped = CommLoop(queue); });
  const std::string failure = ServeTasks(queue, runner);
  comm.join();
  if (!failure.empty()) throw std::runtime_error("rank " + std::to_string(rank_) + ": " + failure);
  if (!stopped.empty()) throw std::runtime_error(stopped);
}

// A worker's messages: tasks in, results out, heartbeats, until rank 0 says stop ("") or
// is gone (returns why).
std::string MpiJob::CommLoop(TaskQueue& queue) {
  Peer& root = peers_[0];
  double last_pid_check = 0;
  Backoff backoff;
  for (;;) {
    bool idle = true;
    while (std::optional<Message> m = Poll(0)) {
      idle = false;
      root.last_heard = Now();
      if (m->tag == kTagTask) queue.Push(wire::DecodeTask(m->bytes));
      if (m->tag == kTagStop) {
        if (m->bytes == "1") SkipFinalize();
        queue.Close();
        return "";
      }
    }
    std::string gone;
    while (std::optional<TaskQueue::Outcome> outcome = queue.TakeOutcome()) {
      idle = false;
      if (outcome->failed) {
        SendToRoot(kTagFailed, outcome->why, root, SameHost(0));
        SkipFinalize();  // rank 0 takes this rank for gone
        queue.Close();
        return "";
      }
      gone = SendToRoot(kTagResult, wire::EncodeResult(outcome->ticket, outcome->result), root,
                        SameHost(0));
      if (!gone.empty()) break;
      root.last_sent = Now();
    }
    const double now = Now();
    if (gone.empty() && now - root.last_sent >= kHeartbeatSeconds) {
      gone = SendToRoot(kTagHeartbeat, "", root, SameHost(0));
      root.last_sent = now;
    }
    if (gone.empty() && now - last_pid_check >= kPidCheckSeconds) {
      last_pid_check = now;
      if (SameHost(0) && PidGone(root.place.pid)) gone = root.Describe(0) + " is gone";
    }
    if (gone.empty() && now - root.last_heard > kSilentSeconds)
      gone = root.Describe(0) + " sent nothing for " +
             std::to_string(static_cast<int>(kSilentSeconds)) + " s";
    if (!gone.empty()) {
      SkipFinalize();
      queue.Close();
      return gone + "; rank " + std::to_string(rank_) + " stops (what rank 0 stored stays)";
    }
    if (idle) {
      backoff.Sleep();
    } else {
      backoff.Reset();
    }
  }
}

MpiPool::MpiPool(MpiJob& job, TaskQueue& local)
    : job_(job), local_(local), ticket_(static_cast<size_t>(job.Size()), 0) {}

int MpiPool::Slots() const { return job_.Size(); }

DeviceInfo MpiPool::Device(int slot) const { return job_.Hellos()[static_cast<size_t>(slot)].device; }

void MpiPool::Submit(int slot, const CandidateTask& task) {
  ticket_[static_cast<size_t>(slot)] = task.ticket;
  if (slot == 0) {
    local_.Push(task);
    return;
  }
  Send(slot, kTagTask, wire::EncodeTask(task));
  job_.Peers()[static_cast<size_t>(slot)].last_sent = Now();
}

void MpiPool::Stop() {
  local_.Close();
  const std::string lost = job_.Finalizes() ? "0" : "1";
  for (int r = 1; r < job_.Size(); ++r) {
    if (!job_.Peers()[static_cast<size_t>(r)].lost) Send(r, kTagStop, lost);
  }
}

std::optional<PoolEvent> MpiPool::Lose(int rank, const std::string& why) {
  Peer& peer = job_.Peers()[static_cast<size_t>(rank)];
  if (peer.lost) return std::nullopt;
  peer.lost = true;
  if (rank != 0) job_.SkipFinalize();
  PoolEvent event;
  event.kind = PoolEvent::Kind::kLost;
  event.slot = rank;
  event.ticket = ticket_[static_cast<size_t>(rank)];
  event.why = why;
  ticket_[static_cast<size_t>(rank)] = 0;
  return event;
}

std::optional<PoolEvent> MpiPool::Receive(const Message& m) {
  Peer& peer = job_.Peers()[static_cast<size_t>(m.from)];
  if (peer.lost) return std::nullopt;  // its work went to another rank
  peer.last_heard = Now();
  if (m.tag == kTagFailed) return Lose(m.from, peer.Describe(m.from) + " failed: " + m.bytes);
  if (m.tag != kTagResult) return std::nullopt;
  PoolEvent event;
  event.slot = m.from;
  event.result = wire::DecodeResult(m.bytes, &event.ticket);
  ATTNTUNE_CHECK_MSG(event.ticket == ticket_[static_cast<size_t>(m.from)], "a result of no task");
  ticket_[static_cast<size_t>(m.from)] = 0;
  return event;
}

// Heartbeats to the other ranks, and a lost event for one that is gone.
std::optional<PoolEvent> MpiPool::CheckPeers(double now) {
  const bool check_pids = now - last_pid_check_ >= kPidCheckSeconds;
  if (check_pids) last_pid_check_ = now;
  for (int r = 1; r < job_.Size(); ++r) {
    Peer& peer = job_.Peers()[static_cast<size_t>(r)];
    if (peer.lost) continue;
    if (check_pids && job_.SameHost(r) && PidGone(peer.place.pid))
      return Lose(r, peer.Describe(r) + " is gone");
    if (now - peer.last_heard > kSilentSeconds)
      return Lose(r, peer.Describe(r) + " sent nothing for " +
                         std::to_string(static_cast<int>(kSilentSeconds)) + " s");
    if (now - peer.last_sent >= kHeartbeatSeconds) {
      Send(r, kTagHeartbeat, "");
      peer.last_sent = now;
    }
  }
  return std::nullopt;
}

std::optional<PoolEvent> MpiPool::Wait(double max_seconds) {
  const double deadline = Now() + max_seconds;
  Backoff backoff;
  for (;;) {
    if (std::optional<TaskQueue::Outcome> outcome = local_.TakeOutcome()) {
      if (outcome->failed) return Lose(0, "rank 0's own evaluation failed: " + outcome->why);
      PoolEvent event;
      event.ticket = outcome->ticket;
      event.result = std::move(outcome->result);
      ticket_[0] = 0;
      return event;
    }
    bool idle = true;
    while (std::optional<Message> m = Poll(MPI_ANY_SOURCE)) {
      idle = false;
      if (std::optional<PoolEvent> event = Receive(*m)) return event;
    }
    const double now = Now();
    if (std::optional<PoolEvent> event = CheckPeers(now)) return event;
    if (now >= deadline) return std::nullopt;
    if (idle) backoff.Sleep();
  }
}

}  // namespace

std::unique_ptr<RankJob> RankJob::Join() {
  if (LaunchedRanks() <= 1) return nullptr;
  return std::make_unique<MpiJob>();
}

}  // namespace attntune
