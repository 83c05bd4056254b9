#include "kube/object.h"

#include <gtest/gtest.h>

#include "kube/resource.h"

namespace nvl72::kube {
namespace {

TEST(ResourceRefTest, Paths) {
  EXPECT_EQ(kPods.CollectionPath("ns"), "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(kPods.CollectionPath(""), "/api/v1/pods");
  EXPECT_EQ(kPods.ObjectPath("ns", "p", "binding"), "/api/v1/namespaces/ns/pods/p/binding");
  EXPECT_EQ(kNodes.ObjectPath("", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(kLeases.ObjectPath("kube-system", "l"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l");
  EXPECT_EQ(kLeases.ApiVersion(), "coordination.k8s.io/v1");
  EXPECT_EQ(kConfigMaps.ApiVersion(), "v1");
  ResourceRef jobs = ResourceRef::Custom("nvl72.dev", "v1alpha1", "nvl72jobs", "NVL72Job", true);
  EXPECT_EQ(jobs.ObjectPath("default", "j", "status"),
            "/apis/nvl72.dev/v1alpha1/namespaces/default/nvl72jobs/j/status");
  EXPECT_EQ(jobs.DisplayName(), "nvl72jobs.nvl72.dev");
  EXPECT_EQ(kCustomResourceDefinitions.ObjectPath("", "x.y"),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y");
}

TEST(ObjectTest, Accessors) {
  Json pod =
      Json::parse(R"({"metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"7",
      "generation":3,"labels":{"a":"b"},"annotations":{"x":"y"}},"spec":{"nodeName":"n1",
      "containers":[{"name":"c"}]}})");
  EXPECT_EQ(Name(pod), "p");
  EXPECT_EQ(Namespace(pod), "ns");
  EXPECT_EQ(Uid(pod), "u");
  EXPECT_EQ(ResourceVersion(pod), "7");
  EXPECT_EQ(Generation(pod), 3);
  EXPECT_EQ(Labels(pod).at("a"), "b");
  EXPECT_EQ(Annotations(pod).at("x"), "y");
  EXPECT_EQ(KeyOf(pod), "ns/p");
  EXPECT_FALSE(IsBeingDeleted(pod));
  EXPECT_EQ(AtPath(pod, "/spec/nodeName"), "n1");
  EXPECT_EQ(AtPath(pod, "/spec/containers/0/name"), "c");
  EXPECT_TRUE(AtPath(pod, "/spec/containers/5/name").is_null());
  EXPECT_TRUE(AtPath(pod, "/nope/x").is_null());
  // Robust to junk.
  EXPECT_EQ(Name(Json("str")), "");
  EXPECT_EQ(Name(Json::parse(R"({"metadata":{"name":5}})")), "");
  EXPECT_EQ(SplitKey("ns/p"), std::make_pair(std::string("ns"), std::string("p")));
  EXPECT_EQ(SplitKey("node"), std::make_pair(std::string(""), std::string("node")));
  EXPECT_EQ(MakeKey("", "n"), "n");
  Json ref = ObjectReferenceFor(Json::parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u"}})"));
  EXPECT_EQ(ref["kind"], "Pod");
  EXPECT_EQ(ref["uid"], "u");
}

TEST(ObjectTest, LabelSelectors) {
  Json obj = Json::parse(R"({"metadata":{"labels":{"app":"web","tier":"fe","env":"prod"}}})");
  auto m = [&](const char* sel) {
    auto r = MatchesLabelSelector(obj, sel);
    EXPECT_TRUE(r.ok()) << sel << ": " << r.status();
    return r.ok() && *r;
  };
  EXPECT_TRUE(m(""));
  EXPECT_TRUE(m("app=web"));
  EXPECT_TRUE(m("app==web,tier=fe"));
  EXPECT_FALSE(m("app=db"));
  EXPECT_TRUE(m("app!=db"));
  EXPECT_TRUE(m("missing!=x"));
  EXPECT_TRUE(m("app"));
  EXPECT_FALSE(m("!app"));
  EXPECT_TRUE(m("!missing"));
  EXPECT_TRUE(m("env in (prod, staging)"));
  EXPECT_FALSE(m("env notin (prod)"));
  EXPECT_TRUE(m("env in (prod),app=web"));
  EXPECT_FALSE(MatchesLabelSelector(obj, "a=b,,c").ok());
  EXPECT_FALSE(MatchesLabelSelector(obj, "env in prod").ok());
  EXPECT_FALSE(MatchesLabelSelector(obj, "env inn (a)").ok());
}

TEST(ObjectTest, Times) {
  auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1136214245)) +
           std::chrono::microseconds(123456);
  EXPECT_EQ(FormatMicroTime(t), "2006-01-02T15:04:05.123456Z");
  EXPECT_EQ(FormatTime(t), "2006-01-02T15:04:05Z");
  auto parsed = ParseTime("2006-01-02T15:04:05.123456Z");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, t);
  EXPECT_EQ(*ParseTime("2006-01-02T15:04:05Z"), t - std::chrono::microseconds(123456));
  EXPECT_EQ(*ParseTime("2006-01-02T16:04:05+01:00"), t - std::chrono::microseconds(123456));
  EXPECT_EQ(*ParseTime("2006-01-02T15:04:05.1Z"),
            t - std::chrono::microseconds(123456) + std::chrono::milliseconds(100));
  EXPECT_FALSE(ParseTime("2006-01-02 15:04:05Z").ok());
  EXPECT_FALSE(ParseTime("2006-01-02T15:04:05").ok());
  EXPECT_FALSE(ParseTime("2006-01-02T15:04:05.Z").ok());
}

TEST(ObjectTest, DropManagedFieldsRemovesBookkeepingOnly) {
  const Json annotations = {{"kubectl.kubernetes.io/last-applied-configuration", "{}"},
                            {"nvl72.dev/node", "n"}};
  Json o = {{"metadata",
             {{"name", "a"},
              {"resourceVersion", "3"},
              {"managedFields", Json::array({{{"manager", "kubectl"}}})},
              {"annotations", annotations}}},
            {"spec", {{"x", 1}}}};
  DropManagedFields(o);
  EXPECT_EQ(
      o,
      Json({{"metadata", {{"name", "a"}, {"resourceVersion", "3"}, {"annotations", annotations}}},
            {"spec", {{"x", 1}}}}));
  for (const Json& j : {Json(), Json(1), Json::array(), Json{{"metadata", 2}}}) {
    Json k = j;
    DropManagedFields(k);
    EXPECT_EQ(k, j);
  }
}

}  // namespace
}  // namespace nvl72::kube
