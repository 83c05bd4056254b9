#include "operator/safety_net.h"

#include <algorithm>

#include "kube/object.h"
#include "model/cluster_state.h"
#include "model/names.h"
#include "operator/job_objects.h"

namespace nvl72::op {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

int64_t IntField(const Json& status, const char* key) {
  auto it = status.find(key);
  return it != status.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// The status of a job whose reservation goes: placement gone, the refused nodes recorded.
Json ReleasedStatus(const Json& job, const std::vector<RefusedRank>& refused, int replans,
                    std::string_view reason, const std::string& message,
                    std::chrono::system_clock::time_point now) {
  Json status = kube::AtPath(job, "/status");
  if (!status.is_object()) status = Json::object();
  const int64_t generation = kube::Generation(job);
  status.erase("placement");
  status.erase("domains");
  Json nodes = ReplansAtGeneration(job) > 0 && status["refusedNodes"].is_array()
                   ? status["refusedNodes"]
                   : Json::array();
  for (const auto& r : refused) {
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
  }
  status["refusedNodes"] = std::move(nodes);
  status["replans"] = replans;
  status["replanGeneration"] = generation;
  status["lastReplanTime"] = kube::FormatTime(now);
  status["state"] = "Waiting";
  SetCondition(status, model::kConditionAdmitted, "False", reason, message, generation, now);
  SetCondition(status, model::kConditionPlaced, "False", reason, message, generation, now);
  return status;
}

// A node verdict of kube-scheduler: its FitError message, "0/<n> nodes are available: ..."
// (NoNodeAvailableMsg in pkg/scheduler/framework/types.go).
bool IsNodeVerdict(const std::string& message) { return message.rfind("0/", 0) == 0; }

}  // namespace

std::vector<RefusedRank> RefusedRanks(const model::JobPlacement& placement,
                                      const std::vector<const Json*>& pods) {
  std::vector<RefusedRank> out;
  for (const Json* p : pods) {
    int rank = -1;
    if (!model::GangRankOf(*p, nullptr, &rank)) continue;
    const model::RankAssignment* a = placement.FindRank(rank);
    if (a == nullptr || kube::Name(*p) != a->pod) continue;
    const Json* c = model::UnschedulableCondition(*p);
    if (c == nullptr) continue;
    auto since = kube::ParseTime(c->value("lastTransitionTime", ""));
    if (!since.ok()) continue;
    out.push_back({rank, a->node, c->value("message", ""), *since});
  }
  std::sort(out.begin(), out.end(),
            [](const RefusedRank& a, const RefusedRank& b) { return a.rank < b.rank; });
  return out;
}

std::vector<RefusedRank> BlamedRanks(std::vector<RefusedRank> refused) {
  const bool any_node_verdict = std::any_of(refused.begin(), refused.end(),
                                            [](const auto& r) { return IsNodeVerdict(r.message); });
  if (any_node_verdict) {
    std::erase_if(refused, [](const RefusedRank& r) { return !IsNodeVerdict(r.message); });
  }
  return refused;
}

int ReplansAtGeneration(const Json& job) {
  const Json& status = kube::AtPath(job, "/status");
  if (!status.is_object() || IntField(status, "replanGeneration") != kube::Generation(job))
    return 0;
  return static_cast<int>(IntField(status, "replans"));
}

bool ReplanLimitReached(const Json& job) {
  const Json* c = model::FindCondition(job, model::kConditionAdmitted);
  return c != nullptr && c->value("reason", "") == kReasonReplanLimit &&
         IntField(kube::AtPath(job, "/status"), "replanGeneration") == kube::Generation(job);
}

SafetyNetDecision DecideSafetyNet(const Json& job, const model::JobPlacement& placement,
                                  const std::vector<const Json*>& pods,
                                  const SafetyNetOptions& options,
                                  std::chrono::system_clock::time_point now) {
  SafetyNetDecision d;
  const int replans = ReplansAtGeneration(job);
  // Backoff: the bound doubles with every re-plan of this generation.
  const auto bound =
      duration_cast<milliseconds>(options.bound) * (int64_t{1} << std::min(replans, 10));
  std::vector<RefusedRank> due;
  for (const RefusedRank& r : RefusedRanks(placement, pods)) {
    const auto waited = duration_cast<milliseconds>(now - r.since);
    if (waited >= bound) {
      due.push_back(r);
    } else if (!d.recheck_after || bound - waited < *d.recheck_after) {
      d.recheck_after = bound - waited;
    }
  }
  if (due.empty()) return d;
  due = BlamedRanks(std::move(due));
  const RefusedRank& first = due.front();
  const std::string what = "kube-scheduler refused rank " + std::to_string(first.rank) +
                           " on its planned node " + first.node + " for " +
                           std::to_string(duration_cast<std::chrono::seconds>(bound).count()) +
                           " s (" + first.message + ")";
  d.replan = true;
  if (replans >= options.max_replans) {
    d.message = what + "; the gang was planned again " + std::to_string(replans) +
                " times already (--max-replans): it waits until its spec changes";
    d.status = ReleasedStatus(job, due, replans, kReasonReplanLimit, d.message, now);
  } else {
    d.message = what + "; planning the gang again without " +
                (due.size() == 1 ? first.node : std::to_string(due.size()) + " nodes") +
                " (re-plan " + std::to_string(replans + 1) + " of at most " +
                std::to_string(options.max_replans) + ")";
    d.status = ReleasedStatus(job, due, replans + 1, kReasonReplanning, d.message, now);
  }
  d.recheck_after.reset();
  return d;
}

}  // namespace nvl72::op
