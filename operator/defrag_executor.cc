#include "operator/defrag_executor.h"

#include <algorithm>

#include "kube/object.h"
#include "model/job_nodes.h"
#include "model/names.h"
#include "operator/job_objects.h"
#include "operator/log.h"
#include "operator/object_store.h"
#include "placement/defrag.h"

namespace nvl72::op {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using Time = std::chrono::system_clock::time_point;

constexpr std::string_view kReasonDefragmentation = "Defragmentation";

// Times as placement's defragmentation rules take them: system_clock ticks since its epoch.
using Ticks = std::chrono::system_clock::duration;

std::optional<Ticks> SinceEpoch(std::optional<Time> t) {
  if (!t) return std::nullopt;
  return t->time_since_epoch();
}

std::optional<Time> LastMoveTime(const Json& job) {
  const Json& t = kube::AtPath(job, "/status/lastDefragMoveTime");
  if (!t.is_string()) return std::nullopt;
  auto parsed = kube::ParseTime(t.get<std::string>());
  if (!parsed.ok()) return std::nullopt;
  return *parsed;
}

int IntAt(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int>() : 0;
}

std::string Secs(milliseconds d) { return std::to_string((d.count() + 999) / 1000) + "s"; }

// The budget: nothing while a move is in flight (Moved True, not timed out), and the minimum
// interval (placement::DefragIntervalEnd) since the last plan or the latest move of any job. False,
// with the reason (and retry_after) in `out`, when no plan may be made now.
bool BudgetAllowsPlan(const std::vector<const Json*>& jobs, const DefragOptions& options, Time now,
                      std::optional<Time> last_plan, DefragDecision& out) {
  int in_flight = 0;
  std::optional<Time> latest = last_plan;
  for (const Json* j : jobs) {
    const auto moved_at = LastMoveTime(*j);
    const bool timed_out = moved_at && now - *moved_at >= options.move_timeout;
    if (model::ConditionIsTrue(*j, kConditionMoved) && model::HoldsReservation(*j) && !timed_out) {
      ++in_flight;
    }
    if (moved_at && (!latest || *moved_at > *latest)) latest = moved_at;
  }
  if (in_flight > 0) {
    out.reason = std::to_string(in_flight) + " job(s) still being moved";
    return false;
  }
  const Ticks ticks = now.time_since_epoch();
  if (auto end = placement::DefragIntervalEnd(SinceEpoch(latest), ticks, options.min_interval)) {
    out.retry_after = duration_cast<milliseconds>(*end - ticks);
    out.reason = "minimum interval between moves: next plan in " + Secs(*out.retry_after);
    return false;
  }
  return true;
}

// The jobs holding GPUs, as the planner sees them (only stored placements can be moved), with the
// job and spec of each for placing it again.
struct RunningJobs {
  std::vector<placement::RunningJob> planner;
  std::vector<const Json*> jobs;
  std::vector<model::JobSpec> specs;
};

RunningJobs CollectRunning(const model::ClusterState& state, const std::vector<const Json*>& jobs,
                           const DefragOptions& options, Time now) {
  RunningJobs out;
  std::vector<std::optional<Ticks>> last_moves;
  for (const Json* j : jobs) {
    const std::string key = kube::KeyOf(*j);
    const model::Reservation* r = state.FindReservation(key);
    if (r == nullptr) continue;
    auto stored = model::PlacementOf(*j);
    auto spec = model::ParseJobSpec(kube::AtPath(*j, "/spec"));
    if (!stored.ok() || !stored->has_value() || !spec.ok()) continue;
    // The operator's own rules; the cooldown is placement::SelectDefragCandidates' below.
    const bool movable = spec->preemptible && !kube::IsBeingDeleted(*j) &&
                         !model::JobFinished(*j) &&
                         !model::ConditionIsTrue(*j, model::kConditionRecovering) &&
                         !model::ConditionIsTrue(*j, kConditionMoved);
    placement::RunningJob rj{key, movable, {}};
    for (placement::NodeId id : r->rank_nodes) {
      if (id != placement::kNoNode) rj.gpus_on_node.emplace_back(id, r->gpus_per_replica);
    }
    out.planner.push_back(std::move(rj));
    out.jobs.push_back(j);
    out.specs.push_back(std::move(spec).value());
    last_moves.push_back(SinceEpoch(LastMoveTime(*j)));
  }
  placement::SelectDefragCandidates(out.planner, last_moves, now.time_since_epoch(),
                                    options.cooldown);
  return out;
}

// Places moved job `i` on `after` (the waiting gang's nodes already taken) and reserves it there.
// The move, or nullopt with `why_not` set when it finds no other nodes.
std::optional<DefragMove> PlaceMovedJob(const placement::PlacementPolicy& policy,
                                        model::ClusterState& after, const RunningJobs& running,
                                        size_t i, const DefragOptions& options,
                                        const std::string& wkey, std::string& why_not) {
  const placement::GangRequest mreq =
      model::JudgeJob(after, *running.jobs[i], running.specs[i], running.planner[i].key, 0,
                      options.gpu_resource)
          .request;
  placement::GangDecision md = policy.PlaceGang(after.snapshot(), mreq);
  if (!md.placed) {
    why_not = wkey + ": " + running.planner[i].key + " would find no other nodes: " + md.reason;
    return std::nullopt;
  }
  DefragMove move;
  move.job = running.jobs[i];
  move.key = running.planner[i].key;
  move.from = **model::PlacementOf(*running.jobs[i]);
  move.to = model::MakeJobPlacement(after.snapshot(), md.placement, kube::Name(*move.job),
                                    running.specs[i].segment_size);
  after.Reserve(move.key, running.specs[i].gpus_per_replica, move.to);
  return move;
}

// Plans for one waiting gang and checks that the plan frees room: the gang fits in the freed domain
// (placement::PlaceInFreedDomain) and then every moved job gets nodes elsewhere at once. True with
// the decision in `out`, else false with `why_not` set.
bool PlanForGang(const placement::PlacementPolicy& policy, const model::ClusterState& state,
                 const DefragWaitingJob& w, const RunningJobs& running,
                 const DefragOptions& options, DefragDecision& out, std::string& why_not) {
  const std::string wkey = kube::KeyOf(*w.job);
  const placement::Snapshot& snap = state.snapshot();
  placement::DefragPlan plan =
      placement::PlanDefrag(snap, policy, w.request, running.planner, options.max_concurrent_moves);
  if (!plan.found || plan.moves.empty()) {
    why_not = wkey + ": " + (plan.found ? "fits without moving anything" : plan.reason);
    return false;
  }
  model::ClusterState after = state;
  for (int m : plan.moves) after.Release(running.planner[static_cast<size_t>(m)].key);
  const std::string dom_name = snap.domains[static_cast<size_t>(plan.domain)].name;
  const auto g = placement::PlaceInFreedDomain(after.snapshot(), policy, w.request, plan.domain);
  if (!g) {
    why_not = wkey + ": moving the planned jobs would not make room in " + dom_name;
    return false;
  }
  after.Reserve(
      wkey, w.spec->gpus_per_replica,
      model::MakeJobPlacement(after.snapshot(), *g, kube::Name(*w.job), w.spec->segment_size));
  std::vector<DefragMove> moves;
  for (int m : plan.moves) {
    auto move =
        PlaceMovedJob(policy, after, running, static_cast<size_t>(m), options, wkey, why_not);
    if (!move) return false;
    moves.push_back(std::move(*move));
  }
  out.execute = true;
  out.waiting_job = w.job;
  out.waiting_key = wkey;
  out.domain = dom_name;
  out.moves = std::move(moves);
  out.reason = "moving " + std::to_string(out.moves.size()) + " preemptible job(s) (";
  for (size_t i = 0; i < out.moves.size(); ++i) {
    out.reason += (i > 0 ? ", " : "") + out.moves[i].key;
  }
  out.reason += ") to free " + dom_name + " for " + wkey;
  return true;
}

}  // namespace

DefragDecision PlanDefragMoves(const placement::PlacementPolicy& policy,
                               const model::ClusterState& state,
                               const std::vector<DefragWaitingJob>& waiting,
                               const std::vector<const Json*>& jobs, const DefragOptions& options,
                               Time now, std::optional<Time> last_plan) {
  DefragDecision out;
  if (!options.enabled) {
    out.reason = "defragmentation is off";
    return out;
  }
  if (waiting.empty()) {
    out.reason = "no job waits";
    return out;
  }
  if (!BudgetAllowsPlan(jobs, options, now, last_plan, out)) return out;
  const RunningJobs running = CollectRunning(state, jobs, options, now);
  std::vector<placement::WaitingGang> gangs;
  gangs.reserve(waiting.size());
  for (const DefragWaitingJob& w : waiting) gangs.push_back({w.spec->mode, w.request.TotalGpus()});
  const int free_gpus = placement::FreeSchedulableGpus(state.snapshot());
  std::string why_not = "no waiting Required gang has enough free GPUs in total";
  for (size_t i : placement::GangsToPlanFor(gangs, free_gpus)) {
    if (PlanForGang(policy, state, waiting[i], running, options, out, why_not)) return out;
  }
  out.reason = why_not;
  return out;
}

// ---------------------------------------------------------------------------------------------

DefragExecutor::DefragExecutor(kube::Client* client, kube::EventRecorder* events,
                               const placement::PlacementPolicy* policy, Enqueue enqueue,
                               Config config)
    : client_(client),
      events_(events),
      policy_(policy),
      enqueue_(std::move(enqueue)),
      config_(std::move(config)) {}

void DefragExecutor::Event(const Json& job, bool warning, const std::string& reason,
                           const std::string& note) {
  if (events_ == nullptr) return;
  events_->Record(job, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                  "Defragment", note.size() > 1000 ? note.substr(0, 1000) : note);
}

StatusOr<DefragDecision> DefragExecutor::Run(const model::ClusterState& state,
                                             const std::vector<DefragWaitingJob>& waiting,
                                             const std::vector<const Json*>& jobs, Time now) {
  std::optional<Time> last;
  {
    std::lock_guard<std::mutex> l(mu_);
    last = last_plan_;
  }
  DefragDecision d = PlanDefragMoves(*policy_, state, waiting, jobs, config_.options, now, last);
  if (!d.execute) return d;
  {
    std::lock_guard<std::mutex> l(mu_);
    last_plan_ = now;
  }
  NVL72_LOG(kInfo) << "defragmentation: " << d.reason;
  Event(*d.waiting_job, false, "Defragmenting", d.reason);
  for (const DefragMove& m : d.moves) {
    Json obj = *m.job;
    Json& status = obj["status"];
    const int64_t generation = kube::Generation(obj);
    const std::string note = "moved from " + JoinDomains(m.from.domains) + " to " +
                             JoinDomains(m.to.domains) + " to make room for " + d.waiting_key +
                             " in " + d.domain + " (defragmentation)";
    status["placement"] = model::PlacementToJson(m.to);
    status["domains"] = JoinDomains(m.to.domains);
    status["defragMoves"] = IntAt(status, "defragMoves") + 1;
    status["lastDefragMoveTime"] = kube::FormatTime(now);
    SetCondition(status, kConditionMoved, "True", kReasonDefragmentation, note, generation, now);
    SetCondition(status, model::kConditionRunning, "False", "MovedForDefragmentation", note,
                 generation, now);
    auto written = client_->UpdateStatus(Nvl72JobsResource(), kube::Namespace(obj), obj,
                                         {.field_manager = config_.field_manager});
    if (!written.ok()) {
      Report("failed");
      NVL72_LOG(kWarning) << "defragmentation: move of " << m.key
                          << " failed: " << written.status();
      return written.status();
    }
    Report("started");
    if (config_.assume) {
      const Json& gpus = kube::AtPath(obj, "/spec/gpusPerReplica");
      config_.assume(*written, gpus.is_number_integer() ? gpus.get<int>() : 0, m.to);
    }
    NVL72_LOG(kInfo) << m.key << ": " << note;
    Event(obj, true, "MovedForDefragmentation", note);
    enqueue_(m.key);
  }
  return d;
}

std::optional<milliseconds> DefragExecutor::MoveTimeoutIn(const Json& job, Time now) const {
  if (!model::ConditionIsTrue(job, kConditionMoved)) return std::nullopt;
  const auto moved_at = LastMoveTime(job);
  if (!moved_at) return std::nullopt;
  return std::max(milliseconds(0),
                  duration_cast<milliseconds>(*moved_at + config_.options.move_timeout - now));
}

namespace {
std::string TimedOutNote(std::chrono::seconds timeout) {
  return "not every rank runs again " + std::to_string(timeout.count()) +
         " s after the move; it no longer holds the defragmentation budget";
}
}  // namespace

std::string_view DefragExecutor::FinishMove(const Json& job, Json& status, bool running,
                                            bool failed, Time now) {
  if (!model::ConditionIsTrue(job, kConditionMoved)) return "";
  const auto left = MoveTimeoutIn(job, now);
  const bool timed_out = !running && !failed && left && left->count() == 0;
  if (!running && !failed && !timed_out) return "";
  const std::string note = failed    ? "the job failed after it was moved"
                           : running ? "every rank runs again on the new nodes"
                                     : TimedOutNote(config_.options.move_timeout);
  SetCondition(status, kConditionMoved, "False",
               failed ? "MoveFailed" : (running ? "MoveCompleted" : "MoveTimedOut"), note,
               kube::Generation(job), now);
  return failed ? "failed" : (running ? "completed" : "timed_out");
}

void DefragExecutor::MoveFinished(const Json& job, std::string_view result) {
  if (result.empty()) return;
  // Metrics know started / completed / failed: a move that timed out did not complete.
  Report(result == "timed_out" ? "failed" : result);
  if (result == "timed_out") {
    Event(job, true, "MoveTimedOut", TimedOutNote(config_.options.move_timeout));
    return;
  }
  const bool failed = result == "failed";
  Event(job, failed, failed ? "MoveFailed" : "MoveCompleted",
        failed ? "the job failed after it was moved" : "every rank runs again on the new nodes");
}

}  // namespace nvl72::op
