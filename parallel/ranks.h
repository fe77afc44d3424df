// A tune launched as several MPI ranks (mpirun, Slurm's srun): every rank evaluates
// candidates on its own device; rank 0 also runs the searches and is the only one that
// opens the database. This header names no MPI type: a build without MPI has the same
// interface, and refuses a launch of several ranks.
#pragma once

#include <memory>
#include <string>

#include "profiler/device.h"
#include "tuner/plan.h"
#include "tuner/pool.h"
#include "tuner/session.h"

namespace attntune {

/// Thrown on a rank that stops because another rank's setup failed: rank 0 prints that
/// rank's error; this one exits with `exit_code` and prints nothing.
struct RankStopped {
  int exit_code = 1;
};

/// This process's part in a job of several ranks.
class RankJob {
 public:
  /// nullptr when this process tunes alone (started without an MPI launcher, or as a job
  /// of one rank). When launched as several ranks by a build without MPI: UserError on
  /// rank 0, RankStopped on the others (one line in all).
  static std::unique_ptr<RankJob> Join();
  virtual ~RankJob() = default;

  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  /// The rank's number among the ranks on its node (`--device cuda:local`).
  virtual int LocalRank() const = 0;

  /// Every rank, once its own setup is done: `error_code` 0 with its `device` and `plan`
  /// (what makes the tune's problems and candidates), or the setup's error (2: the
  /// user's mistake, 1: a failure). If any rank failed, rank 0 throws the first error
  /// (UserError for code 2; another rank's prefixed "rank N: ") and the other ranks
  /// throw RankStopped. Rank 0 also refuses ranks of another build or another plan.
  virtual void Start(int error_code, const std::string& error, const DeviceInfo& device,
                     const std::string& plan) = 0;

  /// Rank 0: the tune of `plan` on every rank's device (RunTune on the ranks as slots);
  /// this rank's own candidates are evaluated by `runner` on the calling thread.
  virtual TuneSummary Coordinate(TunePlan& plan, CandidateRunner& runner,
                                 const ProgressFn& progress) = 0;
  /// Other ranks: evaluate what rank 0 sends, with `runner` on the calling thread, until
  /// it says stop. std::runtime_error when rank 0 is gone or an evaluation failed.
  virtual void Serve(CandidateRunner& runner) = 0;
};

/// The number of ranks an MPI launcher's environment says this process belongs to
/// (Open MPI's mpirun, PMI, PMIx under srun); 1 when none.
int LaunchedRanks();
/// This process's rank as the launcher's environment gives it; 0 when none.
int LaunchedRank();

}  // namespace attntune
