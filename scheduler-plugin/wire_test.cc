#include "scheduler-plugin/wire.h"

#include <gtest/gtest.h>

#include "scheduler-plugin/fixtures_for_test.h"

namespace nvl72::extender {
namespace {

using testing::MakeNode;
using testing::MakePod;

TEST(WireTest, ParsesGoFieldNamesAndPodFields) {
  Json pod = MakePod("ml", "job-3", 4, "", "job", 3, "r000-n05");
  Json req = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"a", "b", "r000-n05"}}};
  auto args = ParseExtenderArgs(req.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->node_cache_capable);
  EXPECT_FALSE(args->has_nodes);
  EXPECT_EQ(args->node_names(), (std::vector<std::string>{"a", "b", "r000-n05"}));
  EXPECT_EQ(args->pod.ns, "ml");
  EXPECT_EQ(args->pod.name, "job-3");
  EXPECT_EQ(args->pod.uid, "uid-ml-job-3");
  EXPECT_EQ(args->pod.gpus, 4);
  EXPECT_EQ(args->pod.job, "job");
  EXPECT_EQ(args->pod.rank, 3);
  EXPECT_EQ(args->pod.planned_node, "r000-n05");
  EXPECT_EQ(args->pod.Key(), "ml/job-3");
}

TEST(WireTest, ParsesLowercaseAndMixedCaseTopLevelNames) {
  Json req = {{"pod", MakePod("ns", "p", 1)}, {"nodenames", {"x"}}};
  auto args = ParseExtenderArgs(req.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->pod.name, "p");
  EXPECT_EQ(args->pod.gpus, 1);
  EXPECT_EQ(args->node_names(), std::vector<std::string>{"x"});
  Json req2 = {{"POD", MakePod("ns", "q", 2)}, {"nodeNames", {"y", "z"}}};
  auto args2 = ParseExtenderArgs(req2.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(args2.ok()) << args2.status();
  EXPECT_EQ(args2->pod.name, "q");
  EXPECT_EQ(args2->node_names().size(), 2u);
}

TEST(WireTest, EscapedNodeNamesAndWhitespace) {
  auto args = ParseExtenderArgs(
      " { \"NodeNames\" : [ \"a\\u0041\" , \"b\\\"c\\n\", \"\\ud83d\\ude00\" ] ,\n \"Pod\" : { } "
      "} ",
      "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->node_names(), (std::vector<std::string>{"aA", "b\"c\n", "\xF0\x9F\x98\x80"}));
  EXPECT_FALSE(ParseExtenderArgs(R"({"Pod": {}, "NodeNames": ["\ud83d"]})", "nvidia.com/gpu").ok());
  EXPECT_FALSE(ParseExtenderArgs(R"({"Pod": {}, "NodeNames": ["\q"]})", "nvidia.com/gpu").ok());
  EXPECT_FALSE(ParseExtenderArgs(R"({"Pod": {}, "x": 01})", "nvidia.com/gpu").ok());
  EXPECT_TRUE(
      ParseExtenderArgs(R"({"Pod": {}, "x": [-1.5e3, true, false, null, "s"]})", "nvidia.com/gpu")
          .ok());
}

TEST(WireTest, FullNodesModeReadsItemNames) {
  Json req = {{"Pod", MakePod("ns", "p", 1)},
              {"Nodes", {{"items", {MakeNode("n1", "c"), MakeNode("n2", "c")}}}},
              {"NodeNames", nullptr}};
  auto args = ParseExtenderArgs(req.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_FALSE(args->node_cache_capable);
  EXPECT_TRUE(args->has_nodes);
  EXPECT_EQ(args->node_names(), (std::vector<std::string>{"n1", "n2"}));
}

TEST(WireTest, GpuRequestFromLimitsAndInitContainers) {
  Json pod = MakePod("ns", "p", 0);
  pod["spec"]["containers"] = {
      {{"name", "a"}, {"resources", {{"limits", {{"nvidia.com/gpu", 2}}}}}},
      {{"name", "b"},
       {"resources",
        {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}};
  pod["spec"]["initContainers"] = {
      {{"name", "i"}, {"resources", {{"requests", {{"nvidia.com/gpu", "4"}}}}}}};
  auto args =
      ParseExtenderArgs(Json{{"Pod", pod}, {"NodeNames", Json::array()}}.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->pod.gpus, 4);  // max(2 + 1, 4)
  EXPECT_EQ(PodInfoFromJson(pod, "nvidia.com/gpu").gpus, 4);
  pod["spec"].erase("initContainers");
  EXPECT_EQ(PodInfoFromJson(pod, "nvidia.com/gpu").gpus, 3);
  auto args2 = ParseExtenderArgs(Json{{"Pod", pod}}.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(args2.ok());
  EXPECT_EQ(args2->pod.gpus, 3);
  EXPECT_TRUE(args2->node_names().empty());
}

TEST(WireTest, MalformedRequestsAreErrorsNotCrashes) {
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[]",
      "42",
      "{}",                                 // no Pod
      R"({"Pod": null, "NodeNames": []})",  // null Pod
      R"({"Pod": 1})",
      R"({"Pod": {}, "NodeNames": [1, 2]})",
      R"({"Pod": {}, "NodeNames": "n1"})",
      R"({"Pod": {}, "NodeNames": [["n1"]]})",
      R"({"Pod": {}, "NodeNames": [{"n": 1}]})",
      R"({"Pod": {}, "Nodes": [1]})",
      R"({"Pod": {}, "NodeNames": ["a")",  // truncated
      R"({"Pod": {"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "lots"}}}]}}})",
      R"({"Pod": {"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": -1}}}]}}})",
      "{\"Pod\": {}, \"NodeNames\": [\"a\"]} trailing",
  };
  for (const auto& body : bad) {
    auto args = ParseExtenderArgs(body, "nvidia.com/gpu");
    EXPECT_FALSE(args.ok()) << body;
    if (!args.ok()) {
      EXPECT_EQ(args.status().code(), StatusCode::kInvalidArgument) << body;
    }
  }
  // Unknown fields and odd-but-valid values are fine.
  auto ok = ParseExtenderArgs(R"({"Pod": {"metadata": {"name": 5}}, "Extra": [1, {"x": null}]})",
                              "nvidia.com/gpu");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(WireTest, NodeNamesMustBeValidUtf8) {
  // Found by the extender_request fuzz target: a name with a stray 0xE1 byte was accepted and
  // echoed back, and the reply was no longer JSON.
  const std::string pod = R"({"metadata":{"name":"p","namespace":"ml"}})";
  for (const std::string& bad : {std::string("r0\xE1"
                                             "0-n02"),
                                 std::string("\xC0\xAF"), std::string("\xED\xA0\x80"),
                                 std::string("\xF4\x90\x80\x80"), std::string("ab\x80")}) {
    std::string body = R"({"Pod":)" + pod;
    body += R"(,"NodeNames":[")";
    body += bad;
    body += R"("]})";
    auto args = ParseExtenderArgs(body, "nvidia.com/gpu");
    EXPECT_FALSE(args.ok()) << "accepted invalid UTF-8 in a node name";
  }
  const std::string good = "n\xC3\xA9-\xE2\x82\xAC-\xF0\x9F\x9A\x80";  // é, €, a 4-byte code point
  auto args = ParseExtenderArgs(R"({"Pod":)" + pod + R"(,"NodeNames":[")" + good + R"("]})",
                                "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  ASSERT_EQ(args->node_names().size(), 1u);
  EXPECT_EQ(args->node_names()[0], good);
  FilterReply r;
  r.passed = {args->node_names()[0]};
  EXPECT_EQ(Json::parse(SerializeFilterResult(r)).at("NodeNames"), Json({good}));
}

TEST(WireTest, FilterResultSharedReasonsAreEscapedPerView) {
  // One buffer, three views: the whole reason, a prefix of it (same address, other length) and
  // another reason; each node must get exactly its own text, escaped.
  const std::string shared = "spare of \"rack-0\"\n(kept free)";
  const std::string other = "reserved for gang ml/a";
  FilterReply r;
  r.failed = {{"n1", shared},
              {"n2", std::string_view(shared).substr(0, 8)},
              {"n3", other},
              {"n4", shared},
              {"n5", std::string_view(shared).substr(0, 8)}};
  const Json j = Json::parse(SerializeFilterResult(r));
  const Json& f = j.at("FailedNodes");
  EXPECT_EQ(f.size(), 5u);
  EXPECT_EQ(f.at("n1"), shared);
  EXPECT_EQ(f.at("n2"), "spare of");
  EXPECT_EQ(f.at("n3"), other);
  EXPECT_EQ(f.at("n4"), shared);
  EXPECT_EQ(f.at("n5"), "spare of");
}

TEST(WireTest, FilterResultUsesGoFieldNames) {
  FilterReply r;
  r.passed = {"n1"};
  r.failed = {{"n2", "reserved \"x\""}};
  r.unresolvable = {{"n3", "gone"}};
  const Json j = Json::parse(SerializeFilterResult(r));
  EXPECT_TRUE(j.at("Nodes").is_null());
  EXPECT_EQ(j.at("NodeNames"), Json({"n1"}));
  EXPECT_EQ(j.at("FailedNodes"), Json({{"n2", "reserved \"x\""}}));
  EXPECT_EQ(j.at("FailedAndUnresolvableNodes"), Json({{"n3", "gone"}}));
  EXPECT_EQ(j.at("Error"), "");
  EXPECT_EQ(j.size(), 5u);

  Json node = MakeNode("n1", "c");
  const Json full = Json::parse(SerializeFilterResultFullNodes({&node}, r));
  EXPECT_TRUE(full.at("NodeNames").is_null());
  EXPECT_EQ(full.at("Nodes").at("items").at(0), node);
}

TEST(WireTest, HostPriorityListRoundTrip) {
  const Json j = Json::parse(SerializeHostPriorityList({"a", "b"}, {7, 0}));
  EXPECT_EQ(j, Json::parse(R"([{"Host":"a","Score":7},{"Host":"b","Score":0}])"));
  EXPECT_EQ(SerializeHostPriorityList({}, {}), "[]");
}

// Replies echo the request's own name literals: the same JSON as escaping the parsed names again,
// whatever escapes the scheduler used.
TEST(WireTest, RepliesEchoTheRequestsNameLiterals) {
  const std::string body =
      R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[ "plain" , "q\"uote","\u0041b","tab\t"]})";
  auto args = ParseExtenderArgs(body, "nvidia.com/gpu");
  ASSERT_TRUE(args.ok()) << args.status();
  const NodeNameList& nodes = *args->nodes;
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes.Literal(0), R"("plain")");
  EXPECT_EQ(nodes.Literal(2), R"("\u0041b")");
  EXPECT_EQ(nodes.names[2], "Ab");
  const std::vector<int> scores = {1, 2, 3, 4};
  EXPECT_EQ(Json::parse(SerializeHostPriorities(nodes, scores)),
            Json::parse(SerializeHostPriorityList(nodes.names, scores)));
  FilterReply literal, plain;
  literal.names_are_literals = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    (i % 2 ? literal.failed.emplace_back(nodes.Literal(i), "why")
           : literal.failed.emplace_back(nodes.Literal(i), "because"));
    (i % 2 ? plain.failed.emplace_back(nodes.names[i], "why")
           : plain.failed.emplace_back(nodes.names[i], "because"));
  }
  literal.passed = {nodes.Literal(1)};
  plain.passed = {nodes.names[1]};
  EXPECT_EQ(Json::parse(SerializeFilterResult(literal)), Json::parse(SerializeFilterResult(plain)));
  // Built from names (full-Nodes mode, tests): the literals are escaped there.
  auto built = NodeNameList::FromNames({"a\"b", "c"});
  EXPECT_EQ(built->Literal(0), R"("a\"b")");
  EXPECT_EQ(built->Literal(1), R"("c")");
}

TEST(WireTest, NodeNamesCacheSharesTheParseOfIdenticalArrays) {
  NodeNamesCache cache(2);
  const std::string a = R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1","n2"]})";
  const std::string a_again = R"({"NodeNames":["n1","n2"],"Pod":{"metadata":{"name":"q"}}})";
  const std::string b = R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1","n3"]})";
  auto first = ParseExtenderArgs(a, "nvidia.com/gpu", &cache);
  auto second = ParseExtenderArgs(a_again, "nvidia.com/gpu", &cache);
  auto other = ParseExtenderArgs(b, "nvidia.com/gpu", &cache);
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_EQ(first->nodes, second->nodes);  // the same shared list
  EXPECT_EQ(second->pod.name, "q");
  EXPECT_NE(first->nodes, other->nodes);
  EXPECT_EQ(other->node_names(), (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(cache.hits(), 1);
  // Alternating arrays (filter: all nodes, prioritize: those that passed) keep hitting, each its
  // own.
  for (int round = 0; round < 3; ++round) {
    auto x = ParseExtenderArgs(a, "nvidia.com/gpu", &cache);
    auto y = ParseExtenderArgs(b, "nvidia.com/gpu", &cache);
    ASSERT_TRUE(x.ok() && y.ok()) << x.status() << " " << y.status();
    EXPECT_EQ(x->nodes, first->nodes);
    EXPECT_EQ(y->nodes, other->nodes);
  }
  EXPECT_EQ(cache.hits(), 7);
  // A malformed array is an error whether or not a cache is given, and is not cached.
  const std::string bad = R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1",2]})";
  EXPECT_FALSE(ParseExtenderArgs(bad, "nvidia.com/gpu", &cache).ok());
  EXPECT_FALSE(ParseExtenderArgs(bad, "nvidia.com/gpu", &cache).ok());
  EXPECT_EQ(cache.hits(), 7);
}

TEST(WireTest, BindingArgsCaseInsensitive) {
  auto a = ParseBindingArgs(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->pod_name, "p");
  EXPECT_EQ(a->pod_namespace, "ns");
  EXPECT_EQ(a->pod_uid, "u");
  EXPECT_EQ(a->node, "n");
  auto b = ParseBindingArgs(R"({"podName":"p","podNamespace":"ns","podUID":"u","node":"n"})");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->node, "n");
  EXPECT_FALSE(ParseBindingArgs(R"({"PodName":"p"})").ok());
  EXPECT_FALSE(ParseBindingArgs(R"({"PodName":1,"PodNamespace":"ns","Node":"n"})").ok());
  EXPECT_FALSE(ParseBindingArgs("{").ok());
  EXPECT_EQ(Json::parse(SerializeBindingResult("")), Json({{"Error", ""}}));
  EXPECT_EQ(Json::parse(SerializeBindingResult("no")), Json({{"Error", "no"}}));
}

TEST(WireTest, PreemptionArgsBothFormsAndResult) {
  Json victim = MakePod("ns", "v", 1, "n1");
  Json full = {{"Pod", MakePod("ns", "p", 4)},
               {"NodeNameToVictims", {{"n1", {{"Pods", {victim}}, {"NumPDBViolations", 1}}}}}};
  auto a = ParsePreemptionArgs(full.dump(), "nvidia.com/gpu");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->victims.size(), 1u);
  EXPECT_EQ(a->victims[0].first, "n1");
  EXPECT_EQ(a->victims[0].second.pod_uids, std::vector<std::string>{"uid-ns-v"});
  EXPECT_EQ(a->victims[0].second.num_pdb_violations, 1);
  EXPECT_EQ(a->pod.gpus, 4);

  auto m = ParsePreemptionArgs(
      R"({"pod":{"metadata":{"name":"p"}},"nodeNameToMetaVictims":{"n2":{"pods":[{"uid":"u1"},{"UID":"u2"}],"numPDBViolations":0}}})",
      "nvidia.com/gpu");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->victims.size(), 1u);
  EXPECT_EQ(m->victims[0].second.pod_uids, (std::vector<std::string>{"u1", "u2"}));
  EXPECT_EQ(
      Json::parse(SerializePreemptionResult(m->victims)),
      Json::parse(
          R"({"NodeNameToMetaVictims":{"n2":{"Pods":[{"UID":"u1"},{"UID":"u2"}],"NumPDBViolations":0}}})"));
  EXPECT_FALSE(ParsePreemptionArgs(R"({"NodeNameToMetaVictims":{}})", "nvidia.com/gpu").ok());
  EXPECT_FALSE(ParsePreemptionArgs(R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[{}]}}})",
                                   "nvidia.com/gpu")
                   .ok());
  EXPECT_FALSE(
      ParsePreemptionArgs(R"({"Pod":{},"NodeNameToMetaVictims":[]})", "nvidia.com/gpu").ok());
}

TEST(WireTest, JsonStringEscaping) {
  using namespace std::string_literals;
  // 8 bytes, the last two a control character and a NUL.
  const std::string raw = "a\"b\\c\n\x01\0"s;
  std::string out;
  AppendJsonString(out, raw);
  EXPECT_EQ(Json::parse(out).get<std::string>(), raw);
  EXPECT_EQ(Json::parse(ErrorBody("x\ty")).at("Error"), "x\ty");
}

TEST(WireTest, CountQuantities) {
  int64_t v = -1;
  EXPECT_TRUE(ParseCountQuantity(std::string_view("4"), &v));
  EXPECT_EQ(v, 4);
  EXPECT_TRUE(ParseCountQuantity(std::string_view("2.0"), &v));
  EXPECT_EQ(v, 2);
  EXPECT_TRUE(ParseCountQuantity(std::string_view("1k"), &v));
  EXPECT_EQ(v, 1000);
  EXPECT_FALSE(ParseCountQuantity(std::string_view("1.5"), &v));
  EXPECT_FALSE(ParseCountQuantity(std::string_view("-1"), &v));
  EXPECT_FALSE(ParseCountQuantity(std::string_view(""), &v));
  EXPECT_FALSE(ParseCountQuantity(std::string_view("2x"), &v));
  EXPECT_TRUE(ParseCountQuantity(Json(3), &v));
  EXPECT_EQ(v, 3);
  EXPECT_FALSE(ParseCountQuantity(Json(true), &v));
  EXPECT_TRUE(ParseCountQuantity(Json(4.0), &v));
  EXPECT_EQ(v, 4);
  EXPECT_FALSE(ParseCountQuantity(Json(1e30), &v)) << "outside int64: no cast";
  EXPECT_FALSE(ParseCountQuantity(Json(-2.0), &v));
  EXPECT_FALSE(ParseCountQuantity(Json(0.5), &v));
}

}  // namespace
}  // namespace nvl72::extender
