#include "model/feasibility.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace nvl72::model {
namespace {

using Json = nlohmann::json;
using Labels = std::vector<std::pair<std::string, std::string>>;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMi = int64_t{1000} << 20;  // 1Mi in milli-units
constexpr int64_t kGi = int64_t{1000} << 30;  // 1Gi in milli-units

// Small fixtures: a pod with one kind of constraint, a node with what the filters read.
PodConstraints Tolerating(std::vector<Toleration> tolerations) {
  PodConstraints pod;
  pod.tolerations = std::move(tolerations);
  return pod;
}

PodConstraints Selecting(Labels selector) {
  PodConstraints pod;
  pod.node_selector = std::move(selector);
  return pod;
}

PodConstraints Requiring(std::vector<NodeSelectorTerm> terms) {
  PodConstraints pod;
  pod.required_terms = std::move(terms);
  return pod;
}

PodConstraints Requesting(ResourceList requests) {
  PodConstraints pod;
  pod.requests = std::move(requests);
  return pod;
}

NodeFacts Node(std::string name, Labels labels, ResourceList allocatable = {{"pods", 110'000}}) {
  NodeFacts node;
  node.name = std::move(name);
  node.labels = std::move(labels);
  node.allocatable = std::move(allocatable);
  return node;
}

// Expected milli values are those of apimachinery's ParseQuantity followed by MilliValue()
// (v0.37), which rounds up; "false" where it errors or where the value leaves int64.
TEST(ParseMilliQuantityTest, ReadsQuantitiesAsTheApiServer) {
  struct Row {
    std::string text;
    bool ok;
    int64_t milli;
  };
  const std::vector<Row> rows = {
      {"500m", true, 500},
      {"2", true, 2000},
      {"1.5Gi", true, 1'610'612'736'000},
      {"1e3", true, 1'000'000},
      {"1E3", true, 1'000'000},
      {"1e+3", true, 1'000'000},
      {"12e-1", true, 1200},
      {"4k", true, 4'000'000},
      {"1Ki", true, 1'024'000},
      {"1Mi", true, 1'048'576'000},
      {"0.1Ki", true, 102'400},  // 102.4 bytes: a binary suffix with a fraction
      {"1P", true, 1'000'000'000'000'000'000},
      {"1n", true, 1},  // rounded up to the smallest milli
      {"1u", true, 1},
      {"1e-30", true, 1},
      {"1.5m", true, 2},
      {"1.0001m", true, 2},
      {"2.5e-3", true, 3},
      {"0.0005", true, 1},
      {"123456789012345678901234567890e-27", true, 123'457},  // 123.4567...
      {".5", true, 500},
      {"1.", true, 1000},  // apimachinery allows an empty fraction
      {"1.G", true, 1'000'000'000'000},
      {"+2", true, 2000},
      {"007", true, 7000},
      {"0", true, 0},
      {"00", true, 0},
      {"0Gi", true, 0},
      {".", true, 0},  // no digits at all reads as zero in apimachinery
      {"+", true, 0},
      {"Gi", true, 0},
      {"-1.5", true, -1500},
      {"-1.0001m", true, -2},  // magnitudes round up (away from zero)
      {"9223372036854775807m", true, kMax},
      {"9223372036854775.807", true, kMax},
      {"9223372036854775.8075", false, 0},  // rounding up leaves int64
      {"9223372036854775808m", false, 0},
      {"9223372036854775807", false, 0},  // fits in units, not in milli-units
      {"8Ei", false, 0},
      {"1E", false, 0},  // exa: 10^21 milli
      {"", false, 0},
      {"1e", false, 0},
      {"1ki", false, 0},
      {"1Ki5", false, 0},
      {"1m3", false, 0},
      {" 1", false, 0},
      {"1 ", false, 0},
      {"0x10", false, 0},
      {"1_000", false, 0},
      {"1e1.5", false, 0},
      {"1.5.5", false, 0},
      {"1.5e3m", false, 0},
      {"abc", false, 0},
  };
  for (const Row& row : rows) {
    int64_t milli = -42;
    EXPECT_EQ(ParseMilliQuantity(std::string_view(row.text), &milli), row.ok) << row.text;
    if (row.ok) {
      EXPECT_EQ(milli, row.milli) << row.text;
    }
  }
}

TEST(ParseMilliQuantityTest, TakesLiteralsAndStrings) {
  int64_t milli = 0;
  EXPECT_TRUE(ParseMilliQuantity("250m", &milli));
  EXPECT_EQ(milli, 250);
  EXPECT_TRUE(ParseMilliQuantity(std::string("3"), &milli));
  EXPECT_EQ(milli, 3000);
}

// Quantity.UnmarshalJSON reads a JSON number from its text and trims a string.
TEST(ParseMilliQuantityTest, ReadsJsonValues) {
  struct Row {
    Json value;
    bool ok;
    int64_t milli;
  };
  const std::vector<Row> rows = {
      {Json(4), true, 4000},        {Json(-2), true, -2000},
      {Json(1.5), true, 1500},      {Json(0.0005), true, 1},
      {Json(" 1Gi\t"), true, kGi},  {Json("2Gi"), true, 2 * kGi},
      {Json(1e30), false, 0},       {Json(18446744073709551615u), false, 0},
      {Json(true), false, 0},       {Json(nullptr), false, 0},
      {Json::array({1}), false, 0},
  };
  for (const Row& row : rows) {
    int64_t milli = -42;
    EXPECT_EQ(ParseMilliQuantity(row.value, &milli), row.ok) << row.value.dump();
    if (row.ok) {
      EXPECT_EQ(milli, row.milli) << row.value.dump();
    }
  }
}

TEST(ResourceListTest, AddSubtractAndAmountOf) {
  ResourceList list = {{"cpu", 1000}, {"memory", 5}};
  AddResources(list, {{"cpu", 500}, {"nvidia.com/gpu", 4000}});
  EXPECT_EQ(list, (ResourceList{{"cpu", 1500}, {"memory", 5}, {"nvidia.com/gpu", 4000}}));
  SubtractResources(list, {{"memory", 7}, {"pods", 1000}});
  EXPECT_EQ(list, (ResourceList{
                      {"cpu", 1500}, {"memory", -2}, {"nvidia.com/gpu", 4000}, {"pods", -1000}}));
  EXPECT_EQ(AmountOf(list, "cpu"), 1500);
  EXPECT_EQ(AmountOf(list, "ephemeral-storage"), 0);
  AddResources(list, {{"cpu", kMax}});
  EXPECT_EQ(AmountOf(list, "cpu"), kMax) << "saturates instead of overflowing";
}

TEST(TaintTest, ToStringAsKubectl) {
  EXPECT_EQ((Taint{"dedicated", "team-a", "NoSchedule"}).ToString(), "dedicated=team-a:NoSchedule");
  EXPECT_EQ((Taint{"node.kubernetes.io/unreachable", "", "NoExecute"}).ToString(),
            "node.kubernetes.io/unreachable:NoExecute");
}

// core/v1 Toleration.ToleratesTaint.
TEST(ToleratesTest, MatchesLikeToleratesTaint) {
  struct Row {
    Toleration toleration;
    Taint taint;
    bool tolerates;
    std::string why;
  };
  const Taint dedicated{"dedicated", "a", "NoSchedule"};
  const std::vector<Row> rows = {
      {{"dedicated", "Equal", "a", "NoSchedule"}, dedicated, true, "same key, value, effect"},
      {{"dedicated", "Equal", "b", "NoSchedule"}, dedicated, false, "Equal compares the value"},
      {{"dedicated", "", "a", "NoSchedule"}, dedicated, true, "operator \"\" means Equal"},
      {{"dedicated", "Exists", "", "NoSchedule"}, dedicated, true, "Exists ignores the value"},
      {{"dedicated", "Exists", "zzz", "NoSchedule"},
       dedicated,
       true,
       "Exists ignores even a value validation would refuse"},
      {{"other", "Exists", "", "NoSchedule"}, dedicated, false, "key differs"},
      {{"dedicated", "Equal", "a", ""}, dedicated, true, "empty effect matches every effect"},
      {{"dedicated", "Equal", "a", "NoExecute"}, dedicated, false, "effect differs"},
      {{"", "Exists", "", ""}, dedicated, true, "empty key with Exists: everything"},
      {{"", "Exists", "", "NoExecute"}, dedicated, false, "everything, but of one effect"},
      // ToleratesTaint skips the key test for an empty key whatever the operator; only API
      // validation ties an empty key to Exists.
      {{"", "Equal", "a", ""}, dedicated, true, "empty key with Equal compares values only"},
      {{"", "Equal", "", ""}, dedicated, false, "... and the value differs here"},
      {{"dedicated", "Gt", "0", ""},
       {"dedicated", "5", "NoSchedule"},
       false,
       "Lt / Gt need the alpha gate TaintTolerationComparisonOperators (off by default)"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(Tolerates(row.toleration, row.taint), row.tolerates) << row.why;
  }
}

// TaintToleration Filter: only NoSchedule / NoExecute taints count; the first one in the node's
// order without a toleration is reported.
TEST(UntoleratedTaintTest, OnlyNoScheduleAndNoExecuteBlock) {
  struct Row {
    std::vector<Taint> taints;
    std::vector<Toleration> tolerations;
    std::string untolerated;  // ToString of the taint, "" for none
  };
  const Taint no_schedule{"a", "1", "NoSchedule"};
  const Taint no_execute{"b", "", "NoExecute"};
  const Taint prefer{"c", "", "PreferNoSchedule"};
  const std::vector<Row> rows = {
      {{}, {}, ""},
      {{prefer}, {}, ""},
      {{no_schedule}, {}, "a=1:NoSchedule"},
      {{prefer, no_execute, no_schedule}, {}, "b:NoExecute"},
      {{no_schedule, no_execute}, {{"a", "Exists", "", ""}}, "b:NoExecute"},
      {{no_schedule, no_execute}, {{"a", "Equal", "1", ""}, {"b", "Exists", "", "NoExecute"}}, ""},
      {{no_schedule, no_execute, prefer}, {{"", "Exists", "", ""}}, ""},
      {{{"a", "1", "SomethingElse"}}, {}, ""},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    NodeFacts node = Node("n", {});
    node.taints = rows[i].taints;
    const PodConstraints pod = Tolerating(rows[i].tolerations);
    const Taint* taint = UntoleratedTaint(pod, node);
    EXPECT_EQ(taint ? taint->ToString() : "", rows[i].untolerated) << "row " << i;
  }
}

// NodeUnschedulable: a cordoned node refuses pods unless they tolerate
// node.kubernetes.io/unschedulable:NoSchedule.
TEST(CheckNodeTest, UnschedulableUnlessTolerated) {
  struct Row {
    bool unschedulable;
    std::vector<Toleration> tolerations;
    Misfit misfit;
  };
  const std::vector<Row> rows = {
      {false, {}, Misfit::kNone},
      {true, {}, Misfit::kUnschedulable},
      {true, {{"node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"}}, Misfit::kNone},
      {true, {{"node.kubernetes.io/unschedulable", "Equal", "", ""}}, Misfit::kNone},
      {true, {{"", "Exists", "", ""}}, Misfit::kNone},
      {true,
       {{"node.kubernetes.io/unschedulable", "Exists", "", "NoExecute"}},
       Misfit::kUnschedulable},
      {true,
       {{"node.kubernetes.io/unschedulable", "Equal", "true", "NoSchedule"}},
       Misfit::kUnschedulable},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    NodeFacts node = Node("n", {});
    node.unschedulable = rows[i].unschedulable;
    const PodConstraints pod = Tolerating(rows[i].tolerations);
    EXPECT_EQ(CheckNode(pod, node, {}).misfit, rows[i].misfit) << "row " << i;
  }
}

TEST(MatchesNodeSelectorTest, EveryPairMustMatch) {
  struct Row {
    Labels selector;
    bool matches;
  };
  const NodeFacts node = Node("n", {{"disk", "ssd"}, {"empty", ""}, {"zone", "a"}});
  const std::vector<Row> rows = {
      {{}, true},
      {{{"disk", "ssd"}}, true},
      {{{"disk", "ssd"}, {"zone", "a"}}, true},
      {{{"disk", "ssd"}, {"zone", "b"}}, false},
      {{{"gpu", "yes"}}, false},
      {{{"empty", ""}}, true},
      {{{"absent", ""}}, false},  // an empty value still needs the label
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const PodConstraints pod = Selecting(rows[i].selector);
    EXPECT_EQ(MatchesNodeSelector(pod, node), rows[i].matches) << "row " << i;
  }
}

NodeSelectorTerm Expr(std::string key, std::string op, std::vector<std::string> values = {}) {
  return {{{std::move(key), std::move(op), std::move(values)}}, {}};
}

NodeSelectorTerm Field(std::string key, std::string op, std::vector<std::string> values) {
  return {{}, {{std::move(key), std::move(op), std::move(values)}}};
}

// component-helpers nodeaffinity + apimachinery labels.Requirement.
TEST(MatchesRequiredAffinityTest, OperatorsTermsAndFields) {
  struct Row {
    std::vector<NodeSelectorTerm> terms;
    bool matches;
    std::string why;
  };
  const NodeSelectorTerm both = {{{"zone", "In", {"a"}}}, {{"metadata.name", "In", {"node-1"}}}};
  const NodeSelectorTerm anded = {{{"zone", "In", {"a"}}, {"cores", "Lt", {"8"}}}, {}};
  const std::vector<Row> rows = {
      {{}, true, "no required affinity"},
      {{Expr("zone", "In", {"b", "a"})}, true, "In"},
      {{Expr("zone", "In", {"b"})}, false, "In, other value"},
      {{Expr("gpu", "In", {"a"})}, false, "In, label absent"},
      {{Expr("zone", "NotIn", {"b"})}, true, "NotIn"},
      {{Expr("zone", "NotIn", {"a"})}, false, "NotIn, value listed"},
      {{Expr("gpu", "NotIn", {"a"})}, true, "NotIn matches a node without the label"},
      {{Expr("zone", "Exists")}, true, "Exists"},
      {{Expr("gpu", "Exists")}, false, "Exists, absent"},
      {{Expr("gpu", "DoesNotExist")}, true, "DoesNotExist"},
      {{Expr("zone", "DoesNotExist")}, false, "DoesNotExist, present"},
      {{Expr("cores", "Gt", {"64"})}, true, "Gt: 72 > 64"},
      {{Expr("cores", "Gt", {"72"})}, false, "Gt is strict"},
      {{Expr("cores", "Lt", {"100"})}, true, "Lt"},
      {{Expr("cores", "Lt", {"72"})}, false, "Lt is strict"},
      {{Expr("zone", "Gt", {"1"})}, false, "Gt on a label that is no integer"},
      {{Expr("gpu", "Lt", {"1"})}, false, "Lt on an absent label"},
      // Invalid requirements (labels.NewRequirement errors) make the term match nothing.
      {{Expr("cores", "Gt", {"-1"})}, false, "\"-1\" is an integer but no valid label value"},
      {{Expr("cores", "Gt", {"1", "2"})}, false, "Gt takes exactly one value"},
      {{Expr("cores", "Gt", {"x"})}, false, "Gt value must be an integer"},
      {{Expr("gpu", "NotIn", {})}, false, "NotIn with no values is invalid"},
      {{Expr("zone", "Exists", {"a"})}, false, "Exists with values is invalid"},
      {{Expr("bad key!", "DoesNotExist")}, false, "invalid label key"},
      {{Expr("zone", "Like", {"a"})}, false, "unknown operator"},
      {{Expr("zone", "In", {"b"}), Expr("cores", "Gt", {"1"})}, true, "terms are ORed"},
      {{Expr("cores", "Gt", {"x"}), Expr("zone", "In", {"a"})},
       true,
       "an invalid term does not spoil the others"},
      {{anded}, false, "requirements are ANDed"},
      {{NodeSelectorTerm{}}, false, "an empty term matches nothing"},
      {{NodeSelectorTerm{}, Expr("zone", "Exists")}, true, "... and is skipped"},
      {{Field("metadata.name", "In", {"node-1"})}, true, "matchFields In"},
      {{Field("metadata.name", "In", {"node-2"})}, false, "matchFields In, other node"},
      {{Field("metadata.name", "NotIn", {"node-1"})}, false, "matchFields NotIn"},
      {{Field("metadata.name", "NotIn", {"node-2"})}, true, "matchFields NotIn, other node"},
      {{Field("metadata.name", "In", {"node-1", "node-2"})}, false, "one value only"},
      {{Field("metadata.name", "Exists", {})}, false, "only In / NotIn on fields"},
      {{Field("metadata.uid", "In", {"x"})}, false, "other fields read as \"\""},
      {{Field("metadata.uid", "NotIn", {"x"})}, true, "... so NotIn holds"},
      {{both}, true, "fields and labels ANDed"},
  };
  const NodeFacts node = Node("node-1", {{"cores", "72"}, {"zone", "a"}});
  for (const Row& row : rows) {
    const PodConstraints pod = Requiring(row.terms);
    EXPECT_EQ(MatchesRequiredAffinity(pod, node), row.matches) << row.why;
  }
}

// LazyErrorNodeSelector.Match: a node without a name has no fields, and matchFields is skipped.
TEST(MatchesRequiredAffinityTest, NamelessNodeSkipsMatchFields) {
  const PodConstraints pod = Requiring({Field("metadata.name", "In", {"node-1"})});
  EXPECT_TRUE(MatchesRequiredAffinity(pod, NodeFacts{}));
  const PodConstraints invalid = Requiring({Field("metadata.name", "In", {})});
  EXPECT_FALSE(MatchesRequiredAffinity(invalid, NodeFacts{})) << "parse errors still count";
}

TEST(PodConstraintsOfTest, ReadsSelectorAffinityTolerationsAndRequests) {
  const Json spec = Json::parse(R"({
    "nodeSelector": {"zone": "a", "disk": "ssd"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
      "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
                    {"key": "x"}, {"operator": "Exists", "tolerationSeconds": 30}],
    "containers": [{"resources": {"requests": {"cpu": "2", "nvidia.com/gpu": 4},
                                  "limits": {"memory": "1Gi"}}}]
  })");
  const auto pod = PodConstraintsOf(spec, {"nvidia.com/gpu"});
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->node_selector, (Labels{{"disk", "ssd"}, {"zone", "a"}}));
  ASSERT_EQ(pod->required_terms.size(), 2u);
  EXPECT_EQ(pod->required_terms[0].match_expressions[0].op, "Gt");
  EXPECT_EQ(pod->required_terms[0].match_expressions[0].values, std::vector<std::string>{"8"});
  EXPECT_EQ(pod->required_terms[1].match_fields[0].key, "metadata.name");
  ASSERT_EQ(pod->tolerations.size(), 3u);
  EXPECT_EQ(pod->tolerations[0].value, "a");
  EXPECT_EQ(pod->tolerations[1].op, "Equal") << "operator \"\" means Equal";
  EXPECT_EQ(pod->tolerations[2].op, "Exists");
  EXPECT_EQ(pod->requests, (ResourceList{{"cpu", 2000}, {"memory", kGi}}));
}

// requiredDuringSchedulingIgnoredDuringExecution present but without terms: kube-scheduler builds
// a selector with no terms, which matches no node. Null means no required affinity.
TEST(PodConstraintsOfTest, RequiredAffinityWithoutTermsMatchesNothing) {
  const auto required = [](Json selector) {
    return Json{
        {"affinity",
         {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", selector}}}}}};
  };
  const Json empty = required(Json::object());
  const Json none = required(nullptr);
  const NodeFacts node = Node("n", {{"zone", "a"}});
  const auto with_empty = PodConstraintsOf(empty);
  const auto with_none = PodConstraintsOf(none);
  ASSERT_TRUE(with_empty.ok() && with_none.ok());
  EXPECT_FALSE(MatchesRequiredAffinity(*with_empty, node));
  EXPECT_TRUE(MatchesRequiredAffinity(*with_none, node));
}

TEST(PodConstraintsOfTest, MalformedFieldsAreNamed) {
  struct Row {
    std::string spec;
    std::string message;
  };
  const std::string terms =
      "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
  const auto affinity = [](const std::string& term) {
    return R"({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
              {"nodeSelectorTerms": [)" +
           term + "]}}}}";
  };
  const std::vector<Row> rows = {
      {"[]", "spec: must be an object"},
      {R"({"tolerations": {}})", "spec.tolerations: must be an array"},
      {R"({"tolerations": [{}, {}, {"operator": "Maybe"}]})",
       "spec.tolerations[2].operator: must be Equal or Exists (got \"Maybe\")"},
      {R"({"tolerations": [{"key": "a", "operator": "Gt", "value": "1"}]})",
       "spec.tolerations[0].operator: must be Equal or Exists (got \"Gt\")"},
      {R"({"tolerations": [{"key": 5}]})", "spec.tolerations[0].key: must be a string"},
      {R"({"tolerations": ["x"]})", "spec.tolerations[0]: must be an object"},
      {R"({"nodeSelector": {"disk": 1}})", "spec.nodeSelector.disk: must be a string"},
      {R"({"affinity": []})", "spec.affinity: must be an object"},
      {affinity(R"({"matchExpressions": [{"key": "a", "operator": "Like"}]})"),
       terms + "[0].matchExpressions[0].operator: unknown operator (got \"Like\")"},
      {affinity(R"({}, {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]})"),
       terms + "[1].matchFields[0].operator: must be In or NotIn (got \"Exists\")"},
      {affinity(R"({"matchExpressions": [{"key": "a", "operator": "In", "values": "b"}]})"),
       terms + "[0].matchExpressions[0].values: must be an array"},
      {affinity(R"({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]})"),
       terms + "[0].matchExpressions[0].values[0]: must be a string"},
      {R"({"containers": [{"resources": {"requests": {"cpu": "lots"}}}]})",
       "spec.containers[0].resources.requests.cpu: must be a quantity"},
      {R"({"initContainers": [{"resources": {"limits": []}}]})",
       "spec.initContainers[0].resources.limits: must be an object"},
      {R"({"overhead": {"memory": true}})", "spec.overhead.memory: must be a quantity"},
  };
  for (const Row& row : rows) {
    const auto pod = PodConstraintsOf(Json::parse(row.spec));
    ASSERT_FALSE(pod.ok()) << row.spec;
    EXPECT_EQ(pod.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(pod.status().message(), row.message);
  }
}

// component-helpers resource.PodRequests with the PodLevelResources gate on (its 1.37 default),
// on a spec defaulted as the API server defaults a new Pod.
TEST(PodRequestsTest, ContainersInitContainersSidecarsOverheadAndPodLevel) {
  struct Row {
    std::string spec;
    ResourceList requests;
    std::string why;
  };
  const std::vector<Row> rows = {
      {R"({"containers": [{"resources": {"requests": {"cpu": "1"}}},
                          {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]})",
       {{"cpu", 1500}, {"memory", kGi}},
       "containers add up"},
      // The example of computePodResourceRequest's comment.
      {R"({"initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1G"}}},
                              {"resources": {"requests": {"cpu": "2", "memory": "3G"}}}],
          "containers": [{"resources": {"requests": {"cpu": "2", "memory": "1G"}}},
                         {"resources": {"requests": {"cpu": "1", "memory": "1G"}}}]})",
       {{"cpu", 3000}, {"memory", 3'000'000'000'000}},
       "max(sum of containers, largest init container)"},
      {R"({"containers": [{"resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "4"}}}]})",
       {{"cpu", 2000}, {"nvidia.com/gpu", 4000}},
       "limits stand in for missing requests"},
      {R"({"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]})",
       {{"cpu", 1000}},
       "a request beats the limit"},
      {R"({"containers": [{"resources": {"requests": {"cpu": "0"}, "limits": {"cpu": "2"}}}]})",
       {{"cpu", 0}},
       "an explicit zero request is kept"},
      // KEP-753: sidecar S (1) then init I (2), container C (3): C + S = 4 beats I + S = 3.
      {R"({"initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                              {"resources": {"requests": {"cpu": "2"}}}],
          "containers": [{"resources": {"requests": {"cpu": "3"}}}]})",
       {{"cpu", 4000}},
       "sidecars run with the containers"},
      {R"({"initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                              {"resources": {"requests": {"cpu": "5"}}}],
          "containers": [{"resources": {"requests": {"cpu": "3"}}}]})",
       {{"cpu", 6000}},
       "an init container runs with the sidecars started before it"},
      {R"({"initContainers": [{"resources": {"requests": {"cpu": "5"}}},
                              {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
          "containers": [{"resources": {"requests": {"cpu": "3"}}}]})",
       {{"cpu", 5000}},
       "... but not with those started after it"},
      {R"({"initContainers": [{"resources": {"requests": {"example.com/dongle": "1"}}}],
          "containers": [{"resources": {"requests": {"cpu": "1"}}}]})",
       {{"cpu", 1000}, {"example.com/dongle", 1000}},
       "a resource only an init container asks for counts"},
      {R"({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
          "overhead": {"cpu": "250m", "memory": "120Mi"}})",
       {{"cpu", 1250}, {"memory", 120 * kMi}},
       "overhead is added"},
      {R"({"resources": {"requests": {"cpu": "4"}},
          "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                         {"resources": {"requests": {"cpu": "1"}}}]})",
       {{"cpu", 4000}, {"memory", kGi}},
       "a pod-level request replaces the containers' total"},
      // defaultPodRequests (pkg/apis/core/v1): a missing pod-level request of cpu / memory is the
      // containers' total when they ask for it, else the pod-level limit.
      {R"({"resources": {"limits": {"memory": "8Gi", "cpu": "4"}},
          "containers": [{"resources": {"requests": {"memory": "1Gi"}}}]})",
       {{"cpu", 4000}, {"memory", kGi}},
       "pod-level limits default only the pod-level requests the containers leave out"},
      {R"({"resources": {"limits": {"hugepages-2Mi": "4Mi"}},
          "containers": [{"resources": {"requests": {"hugepages-2Mi": "2Mi"}}}]})",
       {{"hugepages-2Mi", 4 * kMi}},
       "hugepages: the pod-level limit defaults the request even when containers ask"},
      {R"({"resources": {"requests": {"ephemeral-storage": "1Gi"}},
          "containers": [{"resources": {"requests": {"ephemeral-storage": "2Gi"}}}]})",
       {{"ephemeral-storage", 2 * kGi}},
       "only cpu, memory and hugepages-* exist at pod level"},
      {R"({"resources": {"requests": {"cpu": "2"}},
          "containers": [{"resources": {"requests": {"cpu": "1"}}}],
          "overhead": {"cpu": "100m"}})",
       {{"cpu", 2100}},
       "overhead comes on top of pod-level requests"},
      {R"({})", {}, "nothing requested"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(PodRequests(Json::parse(row.spec)), row.requests) << row.why;
  }
}

TEST(NodeFactsOfTest, ReadsNameLabelsTaintsCordonAndAllocatable) {
  const Json node = Json::parse(R"({
    "metadata": {"name": "n1", "labels": {"zone": "a", "cores": "72", "bad": 1}},
    "spec": {"unschedulable": true,
             "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"},
                        {"key": "gone", "effect": "NoExecute",
                         "timeAdded": "2026-01-01T00:00:00Z"}]},
    "status": {"allocatable": {"cpu": "71500m", "memory": "512Gi", "pods": "110",
                               "nvidia.com/gpu": "4", "broken": "lots"}}
  })");
  const NodeFacts facts = NodeFactsOf(node);
  EXPECT_EQ(facts.name, "n1");
  EXPECT_EQ(facts.labels, (Labels{{"cores", "72"}, {"zone", "a"}}));
  ASSERT_EQ(facts.taints.size(), 2u);
  EXPECT_EQ(facts.taints[0].ToString(), "dedicated=x:NoSchedule");
  EXPECT_EQ(facts.taints[1].ToString(), "gone:NoExecute");
  EXPECT_TRUE(facts.unschedulable);
  EXPECT_EQ(
      facts.allocatable,
      (ResourceList{
          {"cpu", 71'500}, {"memory", 512 * kGi}, {"nvidia.com/gpu", 4000}, {"pods", 110'000}}));
  const NodeFacts empty = NodeFactsOf(Json::array());
  EXPECT_TRUE(empty.name.empty() && empty.taints.empty() && !empty.unschedulable);
}

// NodeResourcesFit fitsRequest.
TEST(CheckNodeTest, ResourcesFitLikeNodeResourcesFit) {
  struct Row {
    ResourceList requests;
    NodeUsage usage;
    std::string detail;  // "" when it fits
    std::string why;
  };
  const NodeFacts node = Node("n", {},
                              {{"cpu", 16'000},
                               {"ephemeral-storage", 100 * kGi},
                               {"memory", 512 * kGi},
                               {"pods", 110'000}});
  const std::vector<Row> rows = {
      {{{"cpu", 8000}}, {{{"cpu", 8000}}, 3}, "", "exactly full fits"},
      {{{"cpu", 8000}}, {{{"cpu", 14'000}}, 3}, "cpu: requests 8, 2 of 16 free", "cpu"},
      {{{"cpu", 500}}, {{{"cpu", 15'750}}, 3}, "cpu: requests 0.5, 0.25 of 16 free", "millicores"},
      {{{"memory", 64 * kGi}},
       {{{"memory", 480 * kGi}}, 3},
       "memory: requests 64Gi, 32Gi of 512Gi free",
       "memory"},
      {{}, {{}, 110}, "too many pods: 110 of 110", "one more pod than allocatable pods"},
      {{}, {{}, 109}, "", "the last pod slot"},
      {{{"example.com/foo", 1000}},
       {{}, 0},
       "example.com/foo: requests 1, 0 of 0 free",
       "a resource the node lacks has 0 allocatable"},
      {{{"example.com/foo", 0}}, {{}, 0}, "", "zero requests are not checked"},
      {{{"cpu", 0}}, {{{"cpu", 17'000}}, 3}, "", "... even on an overcommitted node"},
      {{{"pods", 5000}, {"storage", 1000}},
       {{}, 0},
       "",
       "names that are neither native nor scalar are ignored"},
      {{{"hugepages-2Mi", 2 * kMi}},
       {{}, 0},
       "hugepages-2Mi: requests 2Mi, 0 of 0 free",
       "hugepages are scalar resources"},
      {{{"cpu", 17'000}, {"memory", 1000}},
       {{{"cpu", 17'000}, {"memory", 512 * kGi}}, 110},
       "too many pods: 110 of 110; cpu: requests 17, -1 of 16 free; memory: requests 1, 0 of "
       "512Gi free",
       "all shortfalls, in fitsRequest's order"},
      {{{"memory", 100}},
       {{{"memory", 512 * kGi}}, 0},
       "memory: requests 0.1, 0 of 512Gi free",
       "\"100m\" of memory is one byte to kube"},
  };
  for (const Row& row : rows) {
    const PodConstraints pod = Requesting(row.requests);
    const Fit fit = CheckNode(pod, node, row.usage);
    EXPECT_EQ(fit.detail, row.detail) << row.why;
    EXPECT_EQ(fit.misfit, row.detail.empty() ? Misfit::kNone : Misfit::kResources) << row.why;
  }
  const NodeFacts podless = Node("p", {}, {{"cpu", 1000}});
  EXPECT_EQ(CheckNode(PodConstraints{}, podless, {}).detail, "too many pods: 0 of 0")
      << "no pods allocatable, no pod";
}

// kube-scheduler's default profile runs NodeUnschedulable, TaintToleration, NodeAffinity
// (nodeSelector, then required affinity), NodeResourcesFit, and reports the first refusal.
TEST(CheckNodeTest, ReportsTheFirstFilterInProfileOrder) {
  struct Row {
    bool cordoned;
    bool tainted;
    bool selector_ok;
    bool affinity_ok;
    bool fits;
    Misfit misfit;
    std::string detail;
  };
  const std::vector<Row> rows = {
      {true, true, false, false, false, Misfit::kUnschedulable, "spec.unschedulable"},
      {false, true, false, false, false, Misfit::kTaint, "taint dedicated=x:NoSchedule"},
      {false, false, false, false, false, Misfit::kNodeSelector, "nodeSelector zone=b"},
      {false, false, true, false, false, Misfit::kNodeAffinity,
       "no term of the required node affinity matches"},
      {false, false, true, true, false, Misfit::kResources, "cpu: requests 4, 1 of 1 free"},
      {false, false, true, true, true, Misfit::kNone, ""},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    NodeFacts node =
        Node("n", {{"zone", "a"}}, {{"cpu", row.fits ? 4000 : 1000}, {"pods", 10'000}});
    node.unschedulable = row.cordoned;
    if (row.tainted) node.taints.push_back({"dedicated", "x", "NoSchedule"});
    PodConstraints pod = Requesting({{"cpu", 4000}});
    pod.node_selector = {{"zone", row.selector_ok ? "a" : "b"}};
    pod.required_terms = {Expr("zone", row.affinity_ok ? "Exists" : "DoesNotExist")};
    const Fit fit = CheckNode(pod, node, {});
    EXPECT_EQ(fit.misfit, row.misfit) << "row " << i;
    EXPECT_EQ(fit.detail, row.detail) << "row " << i;
    EXPECT_EQ(fit.ok(), row.misfit == Misfit::kNone) << "row " << i;
  }
}

TEST(MisfitNameTest, PluginNames) {
  EXPECT_EQ(MisfitName(Misfit::kNone), "");
  EXPECT_EQ(MisfitName(Misfit::kUnschedulable), "NodeUnschedulable");
  EXPECT_EQ(MisfitName(Misfit::kTaint), "TaintToleration");
  EXPECT_EQ(MisfitName(Misfit::kNodeSelector), "NodeSelector");
  EXPECT_EQ(MisfitName(Misfit::kNodeAffinity), "NodeAffinity");
  EXPECT_EQ(MisfitName(Misfit::kResources), "NodeResourcesFit");
}

}  // namespace
}  // namespace nvl72::model
