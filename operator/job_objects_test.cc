#include "operator/job_objects.h"

#include <gtest/gtest.h>

#include <map>

#include "model/names.h"

namespace nvl72::op {
namespace {

Json JobWithTemplate(Json tmpl) {
  return {{"metadata", {{"name", "j"}, {"namespace", "ns"}, {"uid", "u1"}}},
          {"spec", {{"replicas", 2}, {"gpusPerReplica", 2}, {"template", std::move(tmpl)}}}};
}

TEST(BuildRankPodTest, KeepsTemplateAndAndsAffinity) {
  Json tmpl = Json::parse(R"({
    "metadata": {"labels": {"app": "x"}, "name": "ignored"},
    "spec": {"restartPolicy": "OnFailure", "priorityClassName": "high",
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                              {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}},
      "containers": [{"name": "c", "env": [{"name": "NVL72_RANK", "value": "stale"}],
                      "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                     {"name": "side"}]}})");
  Json job = JobWithTemplate(tmpl);
  auto spec = model::ParseJobSpec(job["spec"]);
  ASSERT_TRUE(spec.ok()) << spec.status();
  Json pod = BuildRankPod(job, *spec, {1, "n7", "j-1"}, 1234, "nvidia.com/gpu");
  EXPECT_EQ(pod["metadata"]["name"], "j-1");
  EXPECT_EQ(pod["metadata"]["namespace"], "ns");
  EXPECT_EQ(pod["metadata"]["labels"]["app"], "x");
  EXPECT_EQ(pod["metadata"]["labels"]["nvl72.dev/job"], "j");
  EXPECT_EQ(pod["metadata"]["labels"]["nvl72.dev/rank"], "1");
  EXPECT_EQ(pod["metadata"]["annotations"]["nvl72.dev/node"], "n7");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "u1");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "OnFailure");
  EXPECT_EQ(pod["spec"]["hostname"], "j-1");
  EXPECT_EQ(pod["spec"]["subdomain"], "j");
  const Json& terms = pod["spec"]["affinity"]["nodeAffinity"]
                         ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  for (const auto& t : terms) {
    ASSERT_EQ(t["matchExpressions"].size(), 2u);
    EXPECT_EQ(t["matchExpressions"][1]["key"], "kubernetes.io/hostname");
    EXPECT_EQ(t["matchExpressions"][1]["values"][0], "n7");
  }
  // Env replaced, not duplicated; also on the sidecar.
  int rank_envs = 0;
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == "NVL72_RANK") {
      ++rank_envs;
      EXPECT_EQ(e["value"], "1");
    }
  }
  EXPECT_EQ(rank_envs, 1);
  EXPECT_EQ(pod["spec"]["containers"][1]["env"].size(), 4u);
  // The template asked for GPUs itself: left alone.
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_FALSE(pod["spec"]["containers"][0]["resources"].contains("requests"));
}

// Taint-based eviction must never remove a rank before the job's grace: rank pods tolerate the node
// lifecycle NoExecute taints with no time limit, the template's own tolerationSeconds for them is
// replaced, and its other tolerations stay.
TEST(BuildRankPodTest, ToleratesNodeLifecycleTaintsWithoutATimeLimit) {
  Json tmpl = Json::parse(R"({"spec": {"containers": [{"name": "c"}], "tolerations": [
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}]}})");
  Json job = JobWithTemplate(tmpl);
  auto spec = model::ParseJobSpec(job["spec"]);
  ASSERT_TRUE(spec.ok()) << spec.status();
  Json pod = BuildRankPod(job, *spec, {0, "n1", "j-0"}, 29500, "nvidia.com/gpu");
  std::map<std::string, Json> no_execute;
  int others = 0;
  for (const auto& t : pod["spec"]["tolerations"]) {
    if (t.value("effect", "") == "NoExecute") {
      no_execute[t["key"]] = t;
    } else {
      ++others;
    }
  }
  ASSERT_EQ(no_execute.size(), 2u);
  for (const char* key : {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}) {
    ASSERT_TRUE(no_execute.count(key)) << key;
    EXPECT_EQ(no_execute[key]["operator"], "Exists");
    EXPECT_FALSE(no_execute[key].contains("tolerationSeconds")) << key;
  }
  // The template's two NoSchedule tolerations stay, and the GPU resource's taint is tolerated (the
  // ExtendedResourceToleration admission plugin is off by default, so the operator adds it).
  EXPECT_EQ(others, 3);
  bool gpu = false;
  for (const auto& t : pod["spec"]["tolerations"]) {
    gpu = gpu || (t.value("key", "") == "nvidia.com/gpu" && t.value("operator", "") == "Exists" &&
                  t.value("effect", "") == "NoSchedule");
  }
  EXPECT_TRUE(gpu) << pod["spec"]["tolerations"].dump();
}

// A rank kube-scheduler refuses on its planned node: the Placed condition says so with its message.
TEST(SummaryTest, ARefusedRankIsNamedWithTheSchedulersMessage) {
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}, {1, "n1", "j-1"}};
  Json bound = {{"metadata",
                 {{"name", "j-0"},
                  {"labels", {{"nvl72.dev/job", "j"}, {"nvl72.dev/rank", "0"}}},
                  {"annotations", {{"nvl72.dev/node", "n0"}}}}},
                {"spec", {{"nodeName", "n0"}}},
                {"status", {{"phase", "Running"}}}};
  Json refused = {{"metadata",
                   {{"name", "j-1"},
                    {"labels", {{"nvl72.dev/job", "j"}, {"nvl72.dev/rank", "1"}}},
                    {"annotations", {{"nvl72.dev/node", "n1"}}}}},
                  {"spec", Json::object()},
                  {"status",
                   {{"phase", "Pending"},
                    {"conditions",
                     {{{"type", "PodScheduled"},
                       {"status", "False"},
                       {"reason", "Unschedulable"},
                       {"message", "0/2 nodes are available: 1 Insufficient cpu."}}}}}}};
  PodSummary s = SummarizePods(p, {&bound, &refused});
  EXPECT_EQ(s.refused, "rank 1 on n1: 0/2 nodes are available: 1 Insufficient cpu.");
  Json status;
  ApplyPlacedStatus(status, p, s, 1, std::chrono::system_clock::now());
  const Json job = {{"status", status}};
  const Json* placed = model::FindCondition(job, model::kConditionPlaced);
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ((*placed)["reason"], "Unschedulable");
  EXPECT_EQ((*placed)["message"],
            "1 of 2 rank pods bound; kube-scheduler refuses rank 1 on n1: 0/2 nodes are available: "
            "1 Insufficient cpu.");
  // Another reason than Unschedulable (an extender error) is not a refusal.
  refused["status"]["conditions"][0]["reason"] = "SchedulerError";
  EXPECT_EQ(SummarizePods(p, {&bound, &refused}).refused, "");
}

TEST(ConditionsTest, TransitionTimeMovesOnlyOnStatusChange) {
  Json status;
  auto t0 = std::chrono::system_clock::from_time_t(1000000);
  auto t1 = t0 + std::chrono::seconds(5);
  EXPECT_TRUE(SetCondition(status, "Admitted", "False", "Waiting", "m1", 1, t0));
  const std::string first = status["conditions"][0]["lastTransitionTime"];
  EXPECT_FALSE(SetCondition(status, "Admitted", "False", "Waiting", "m1", 1, t1));
  EXPECT_TRUE(SetCondition(status, "Admitted", "False", "Waiting", "m2", 1, t1));
  EXPECT_EQ(status["conditions"][0]["lastTransitionTime"], first);
  EXPECT_TRUE(SetCondition(status, "Admitted", "True", "Admitted", "ok", 2, t1));
  EXPECT_NE(status["conditions"][0]["lastTransitionTime"], first);
  EXPECT_EQ(status["conditions"][0]["observedGeneration"], 2);
  EXPECT_EQ(status["conditions"].size(), 1u);
}

TEST(SummaryTest, StatesFromPods) {
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}, {1, "n1", "j-1"}};
  auto pod = [](int rank, const std::string& node, const std::string& phase) {
    return Json{{"metadata",
                 {{"name", "j-" + std::to_string(rank)},
                  {"labels", {{"nvl72.dev/job", "j"}, {"nvl72.dev/rank", std::to_string(rank)}}},
                  {"annotations", {{"nvl72.dev/node", "n" + std::to_string(rank)}}}}},
                {"spec", {{"nodeName", node}}},
                {"status", {{"phase", phase}}}};
  };
  Json a = pod(0, "n0", "Running"), b = pod(1, "n9", "Pending");
  PodSummary s = SummarizePods(p, {&a, &b});
  EXPECT_EQ(s.created, 2);
  EXPECT_EQ(s.bound, 1);
  EXPECT_EQ(s.misplaced, 1);
  EXPECT_EQ(s.running, 1);
  Json status;
  auto now = std::chrono::system_clock::now();
  EXPECT_TRUE(ApplyPlacedStatus(status, p, s, 1, now));
  EXPECT_EQ(status["state"], "Admitted");
  EXPECT_FALSE(ApplyPlacedStatus(status, p, s, 1, now));
  b = pod(1, "n1", "Running");
  s = SummarizePods(p, {&a, &b});
  EXPECT_TRUE(ApplyPlacedStatus(status, p, s, 1, now));
  EXPECT_EQ(status["state"], "Running");
  b = pod(1, "n1", "Failed");
  s = SummarizePods(p, {&a, &b});
  EXPECT_TRUE(ApplyPlacedStatus(status, p, s, 1, now));
  EXPECT_EQ(status["state"], "Failed");
}

// A rank moved by recovery keeps its pod name; until the watch delivers the old pod's deletion the
// store still holds it, Failed on the node the rank left. It is no longer the rank's pod: the job
// does not fail for it (CI run of session 18: recovery_defrag_e2e's job went Failed this way).
TEST(SummaryTest, ALeftoverPodOfAMovedRankDoesNotCount) {
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n5", "j-0"}};  // rank 0 moved from n0 to n5
  Json old = Json::parse(R"({"metadata": {"name": "j-0",
      "labels": {"nvl72.dev/job": "j", "nvl72.dev/rank": "0"},
      "annotations": {"nvl72.dev/node": "n0"}}, "spec": {"nodeName": "n0"},
      "status": {"phase": "Failed", "reason": "NodeLost"}})");
  PodSummary s = SummarizePods(p, {&old});
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.created, 0) << "the rank's pod on n5 is not created yet";
  Json status;
  ApplyPlacedStatus(status, p, s, 1, std::chrono::system_clock::now());
  EXPECT_NE(status["state"], "Failed");
  // The rank's own pod (planned for n5) failing does fail the job.
  Json now_pod = old;
  now_pod["metadata"]["annotations"]["nvl72.dev/node"] = "n5";
  now_pod["spec"]["nodeName"] = "n5";
  now_pod["status"].erase("reason");
  EXPECT_EQ(SummarizePods(p, {&old, &now_pod}).failed, 1);
}

// Issue 27 case 8: the template's own MASTER_PORT wins (two hostNetwork jobs packed on the same
// nodes need different ports), and a hostNetwork rank resolves the Service name MASTER_ADDR.
TEST(BuildRankPodTest, TheTemplatesMasterPortWinsAndHostNetworkGetsClusterDns) {
  Json tmpl = Json::parse(R"({"spec": {"hostNetwork": true, "containers": [
      {"name": "c", "env": [{"name": "MASTER_PORT", "value": "29600"}]}, {"name": "side"}]}})");
  Json job = JobWithTemplate(tmpl);
  auto spec = model::ParseJobSpec(job["spec"]);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->master_port, 29600);
  Json pod = BuildRankPod(job, *spec, {0, "n0", "j-0"}, 29500, "nvidia.com/gpu");
  for (const auto& c : pod["spec"]["containers"]) {
    int ports = 0;
    for (const auto& e : c["env"]) {
      if (e["name"] != "MASTER_PORT") continue;
      ++ports;
      EXPECT_EQ(e["value"], "29600") << c["name"];
    }
    EXPECT_EQ(ports, 1) << c["name"];
  }
  EXPECT_EQ(pod["spec"]["dnsPolicy"], "ClusterFirstWithHostNet");
  EXPECT_EQ(BuildHeadlessService(job, spec->EffectiveMasterPort(29500))["spec"]["ports"][0]["port"],
            29600);
  // An explicit policy other than ClusterFirst is the user's; pods without hostNetwork keep theirs.
  auto pod_of = [](const Json& t) {
    Json j = JobWithTemplate(t);
    auto sp = model::ParseJobSpec(j["spec"]);
    EXPECT_TRUE(sp.ok()) << sp.status();
    return BuildRankPod(j, *sp, {0, "n0", "j-0"}, 29500, "nvidia.com/gpu");
  };
  tmpl["spec"]["dnsPolicy"] = "None";
  EXPECT_EQ(pod_of(tmpl)["spec"]["dnsPolicy"], "None");
  tmpl["spec"].erase("dnsPolicy");
  tmpl["spec"]["hostNetwork"] = false;
  EXPECT_FALSE(pod_of(tmpl)["spec"].contains("dnsPolicy"));
}

TEST(BuildRankPodTest, WithoutATemplatePortTheOperatorsPortIsUsed) {
  Json job = JobWithTemplate(Json::parse(R"({"spec": {"containers": [{"name": "c"}]}})"));
  auto spec = model::ParseJobSpec(job["spec"]);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->master_port.has_value());
  Json pod = BuildRankPod(job, *spec, {0, "n0", "j-0"}, 29511, "nvidia.com/gpu");
  bool found = false;
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == "MASTER_PORT") found = e["value"] == "29511";
  }
  EXPECT_TRUE(found);
}

TEST(JobSpecMasterPortTest, APortThatIsNoPortOrDisagreesIsRejectedWithTheField) {
  for (
      const char* tmpl :
      {R"({"spec": {"containers": [{"name": "c", "env": [{"name": "MASTER_PORT", "value": "http"}]}]}})",
       R"({"spec": {"containers": [{"name": "c", "env": [{"name": "MASTER_PORT", "value": "70000"}]}]}})",
       R"({"spec": {"containers": [{"name": "a", "env": [{"name": "MASTER_PORT", "value": "1"}]},
                                       {"name": "b", "env": [{"name": "MASTER_PORT", "value": "2"}]}]}})"}) {
    Json job = JobWithTemplate(Json::parse(tmpl));
    auto spec = model::ParseJobSpec(job["spec"]);
    ASSERT_FALSE(spec.ok()) << tmpl;
    EXPECT_NE(spec.status().message().find("MASTER_PORT"), std::string::npos) << spec.status();
  }
}

// Issue 27 case 14: the Failed condition says why the rank failed.
TEST(FailedPodDetailTest, NamesTheContainerExitCodeAndReasonElseThePodsReason) {
  Json pod = Json::parse(R"({"status": {"phase": "Failed", "containerStatuses": [
      {"name": "side", "state": {"terminated": {"exitCode": 0}}},
      {"name": "trainer", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}})");
  EXPECT_EQ(FailedPodDetail(pod), "container trainer exited with code 137 (OOMKilled)");
  pod = Json::parse(R"({"status": {"phase": "Failed", "reason": "Evicted",
      "message": "The node was low on resource: memory."}})");
  EXPECT_EQ(FailedPodDetail(pod), "Evicted: The node was low on resource: memory.");
  EXPECT_EQ(FailedPodDetail(Json::parse(R"({"status": {"phase": "Failed"}})")), "");

  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}};
  Json failed = Json::parse(R"({"metadata": {"name": "j-0",
      "labels": {"nvl72.dev/job": "j", "nvl72.dev/rank": "0"},
      "annotations": {"nvl72.dev/node": "n0"}}, "spec": {"nodeName": "n0"},
      "status": {"phase": "Failed", "containerStatuses": [
        {"name": "trainer", "state": {"terminated": {"exitCode": 3, "message": "NCCL error"}}}]}})");
  Json status;
  ApplyPlacedStatus(status, p, SummarizePods(p, {&failed}), 1, std::chrono::system_clock::now());
  const Json job = {{"status", status}};
  EXPECT_EQ(model::FindCondition(job, model::kConditionFailed)->value("message", ""),
            "rank pod j-0 failed: container trainer exited with code 3: NCCL error");
}

// Issue 27 case 9: status.state follows the Recovering condition.
TEST(SyncRecoveringStateTest, StateFollowsTheRecoveringCondition) {
  const auto now = std::chrono::system_clock::now();
  Json status = {{"state", "Running"}};
  SetCondition(status, model::kConditionRecovering, "True", "ReplacingRanks", "m", 1, now);
  EXPECT_TRUE(SyncRecoveringState(status));
  EXPECT_EQ(status["state"], "Recovering");
  EXPECT_FALSE(SyncRecoveringState(status));
  SetCondition(status, model::kConditionRecovering, "False", "Recovered", "m", 1, now);
  EXPECT_TRUE(SyncRecoveringState(status));
  EXPECT_EQ(status["state"], "Admitted");
  status["state"] = "Failed";
  SetCondition(status, model::kConditionRecovering, "True", "ReplacingRanks", "m", 1, now);
  EXPECT_FALSE(SyncRecoveringState(status)) << "an ended job stays ended";
}

// Issue 27 case 9 through the status the reconciler writes: while a recovery is on (Recovering
// True), state is Recovering even when every pod of the placement runs, so the printer column and
// `kubectl nvl72 jobs` agree with the conditions; once it ends, state follows the pods again.
TEST(ApplyPlacedStatusTest, StateIsRecoveringWhileTheRecoveringConditionIsTrue) {
  const auto now = std::chrono::system_clock::now();
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}, {1, "n1", "j-1"}};
  auto running = [](int rank, const std::string& node) {
    return Json{{"metadata",
                 {{"name", "j-" + std::to_string(rank)},
                  {"labels", {{"nvl72.dev/job", "j"}, {"nvl72.dev/rank", std::to_string(rank)}}},
                  {"annotations", {{"nvl72.dev/node", node}}}}},
                {"spec", {{"nodeName", node}}},
                {"status", {{"phase", "Running"}}}};
  };
  const Json r0 = running(0, "n0");
  const Json r1 = running(1, "n1");
  Json status = {{"state", "Running"}};
  SetCondition(status, model::kConditionRecovering, "True", "ReplacingRanks", "rank 1", 1, now);
  ApplyPlacedStatus(status, p, SummarizePods(p, {&r0, &r1}), 1, now);
  EXPECT_EQ(status["state"], "Recovering") << status.dump();
  SetCondition(status, model::kConditionRecovering, "False", "Recovered", "done", 1, now);
  ApplyPlacedStatus(status, p, SummarizePods(p, {&r0, &r1}), 1, now);
  EXPECT_EQ(status["state"], "Running") << status.dump();
}

// The Running condition says why not every rank runs, most specific cause first.
TEST(NotRunningReasonTest, MostSpecificCauseFirst) {
  PodSummary s;
  s.ranks = 4;
  s.created = 4;
  s.bound = 4;
  s.running = 2;
  EXPECT_EQ(NotRunningReason(s).reason, "RanksNotRunning");
  EXPECT_EQ(NotRunningReason(s).message, "2 of 4 ranks running; the others are starting");
  s.bound = 3;
  EXPECT_EQ(NotRunningReason(s).reason, "PodsPending");
  EXPECT_EQ(NotRunningReason(s).message,
            "2 of 4 ranks running; 1 rank pods not bound to a node yet");
  s.waiting = "rank 3: container c ImagePullBackOff: x";
  EXPECT_EQ(NotRunningReason(s).reason, "ContainerWaiting");
  s.claim_pending = "rank 1: resource claim c not created yet (from ResourceClaimTemplate t)";
  EXPECT_EQ(NotRunningReason(s).reason, "ClaimPending");
  s.misplaced = 1;
  EXPECT_EQ(NotRunningReason(s).reason, "Misplaced");
  s.refused = "rank 1 on n1: no";
  EXPECT_EQ(NotRunningReason(s).reason, "Unschedulable");
  s.rejected = "rank pod j-2: forbidden";
  EXPECT_EQ(NotRunningReason(s).reason, "PodRejected");
  EXPECT_NE(NotRunningReason(s).message.find("the API server rejects rank pod j-2"),
            std::string::npos);
}

TEST(SummaryTest, ABoundPendingRankWithAWaitingContainerIsNamed) {
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}};
  Json pod = Json::parse(R"({"metadata": {"name": "j-0",
      "labels": {"nvl72.dev/job": "j", "nvl72.dev/rank": "0"},
      "annotations": {"nvl72.dev/node": "n0"}}, "spec": {"nodeName": "n0"},
      "status": {"phase": "Pending", "containerStatuses": [
        {"name": "trainer", "state": {"waiting": {"reason": "ImagePullBackOff",
                                                   "message": "Back-off pulling image"}}}]}})");
  EXPECT_EQ(SummarizePods(p, {&pod}).waiting,
            "rank 0: container trainer ImagePullBackOff: Back-off pulling image");
  pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] = "ContainerCreating";
  EXPECT_EQ(SummarizePods(p, {&pod}).waiting, "") << "normal start-up is no reason";
}

// A rank whose claim kube-controller-manager has not made from its template yet: kube-scheduler
// waits for the claim in silence, so the summary names it (reason ClaimPending).
TEST(SummaryTest, AnUnboundRankWhoseClaimIsNotMadeYetIsNamed) {
  model::JobPlacement p;
  p.domains = {"d"};
  p.ranks = {{0, "n0", "j-0"}};
  Json pod = Json::parse(R"({"metadata": {"name": "j-0",
      "labels": {"nvl72.dev/job": "j", "nvl72.dev/rank": "0"},
      "annotations": {"nvl72.dev/node": "n0"}},
      "spec": {"resourceClaims": [{"name": "scratch", "resourceClaimName": "mine"},
                                  {"name": "nvl72-channel", "resourceClaimTemplateName": "j-seg-0-channel"}]},
      "status": {"phase": "Pending"}})");
  PodSummary s = SummarizePods(p, {&pod});
  EXPECT_EQ(s.claim_pending,
            "rank 0: resource claim nvl72-channel not created yet (from ResourceClaimTemplate "
            "j-seg-0-channel)");
  EXPECT_EQ(NotRunningReason(s).reason, "ClaimPending");
  pod["status"]["resourceClaimStatuses"] = {
      {{"name", "nvl72-channel"}, {"resourceClaimName", "j-0-nvl72-channel-x7k2p"}}};
  EXPECT_EQ(SummarizePods(p, {&pod}).claim_pending, "") << "made: kube-scheduler's turn";
  EXPECT_EQ(NotRunningReason(SummarizePods(p, {&pod})).reason, "PodsPending");
}

// The stuck rule: Running False for at least the bound, on a job that holds a reservation.
TEST(StuckOfTest, RunningFalseForTheBoundIsStuckAndTheRecheckSaysWhen) {
  const auto t0 = std::chrono::system_clock::from_time_t(2000000000);
  Json status = {
      {"placement",
       {{"domains", {"d"}}, {"ranks", {{{"rank", 0}, {"node", "n0"}, {"pod", "j-0"}}}}}}};
  SetCondition(status, model::kConditionAdmitted, "True", "Admitted", "m", 1, t0);
  SetCondition(status, model::kConditionRunning, "False", "ContainerWaiting", "why", 1, t0);
  Json job = {{"metadata", {{"name", "j"}, {"namespace", "ns"}}},
              {"spec", {{"replicas", 1}}},
              {"status", status}};
  std::optional<std::chrono::seconds> recheck;
  EXPECT_FALSE(StuckOf(job, t0 + std::chrono::seconds(100), std::chrono::seconds(300), &recheck));
  ASSERT_TRUE(recheck.has_value());
  EXPECT_EQ(recheck->count(), 200);
  auto stuck = StuckOf(job, t0 + std::chrono::seconds(300), std::chrono::seconds(300), &recheck);
  ASSERT_TRUE(stuck.has_value());
  EXPECT_EQ(stuck->reason, "ContainerWaiting");
  EXPECT_EQ(stuck->message, "why");
  EXPECT_EQ(stuck->age.count(), 300);
  EXPECT_FALSE(recheck.has_value());
  EXPECT_FALSE(StuckOf(job, t0 + std::chrono::seconds(900), std::chrono::seconds(0)))
      << "0 turns the rule off";
  auto counts = CountStuckJobs({std::make_shared<const Json>(job)}, t0 + std::chrono::seconds(400),
                               std::chrono::seconds(300));
  EXPECT_EQ(counts["ContainerWaiting"], 1);
  SetCondition(job["status"], model::kConditionRunning, "True", "AllRanksRunning", "ok", 1, t0);
  EXPECT_FALSE(StuckOf(job, t0 + std::chrono::seconds(900), std::chrono::seconds(300)));
}

}  // namespace
}  // namespace nvl72::op
