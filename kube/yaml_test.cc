#include "kube/yaml.h"

#include <gtest/gtest.h>

#include <string>

namespace nvl72::kube {
namespace {

TEST(YamlTest, BlockFlowAndScalars) {
  auto v = ParseYaml(R"(---
# comment
a: 1
b:
  c: "x: y # not a comment"
  d:
    - 1
    - e: f
      g: h
    -
      i: j
  k: [p, 'q r', {s: [t, u]}]
list:
- x
- y
empty:
n: null
tilde: ~
t: true
quoted_true: "true"
f: False
url: http://a:b/c#frag
)");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)["a"], "1");  // numbers stay strings
  EXPECT_EQ((*v)["b"]["c"], "x: y # not a comment");
  EXPECT_EQ((*v)["b"]["d"][0], "1");
  EXPECT_EQ((*v)["b"]["d"][1]["e"], "f");
  EXPECT_EQ((*v)["b"]["d"][1]["g"], "h");
  EXPECT_EQ((*v)["b"]["d"][2]["i"], "j");
  EXPECT_EQ((*v)["b"]["k"][1], "q r");
  EXPECT_EQ((*v)["b"]["k"][2]["s"][1], "u");  // nested flow collections (mini_yaml refused them)
  EXPECT_EQ((*v)["list"].size(), 2u);
  EXPECT_TRUE((*v)["empty"].is_null());
  EXPECT_TRUE((*v)["n"].is_null());
  EXPECT_TRUE((*v)["tilde"].is_null());
  EXPECT_EQ((*v)["t"], true);
  EXPECT_EQ((*v)["quoted_true"], "true");
  EXPECT_EQ((*v)["f"], false);
  EXPECT_EQ((*v)["url"], "http://a:b/c#frag");
}

TEST(YamlTest, BlockScalarsAnchorsAndJson) {
  auto v = ParseYaml(R"(defaults: &d
  server: https://h:6443
  insecure-skip-tls-verify: true
one: *d
literal: |
  line 1
  line 2
folded: >-
  a
  b
)");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)["one"]["server"], "https://h:6443");
  EXPECT_EQ((*v)["one"]["insecure-skip-tls-verify"], true);
  EXPECT_EQ((*v)["literal"], "line 1\nline 2\n");
  EXPECT_EQ((*v)["folded"], "a b");
  auto j = ParseYaml(R"({"a": [1, "two", {"b": null}], "c": "\u00e9"})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"][1], "two");
  EXPECT_TRUE((*j)["a"][2]["b"].is_null());
  EXPECT_EQ((*j)["c"], "\xc3\xa9");
}

TEST(YamlTest, ErrorsNameTheLine) {
  auto bad = ParseYaml("a: 1\nb: [unclosed\nc: 2\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("line "), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseYaml("{bad json").ok());
  EXPECT_FALSE(ParseYaml("a: *undefined_anchor\n").ok());
  auto key = ParseYaml("? [a, b]\n: c\n");
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("not a scalar"), std::string::npos) << key.status();
}

TEST(YamlTest, AliasBombAndDeepNestingAreRefused) {
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 6; ++i) {  // 10^6 leaves once expanded
    const std::string n = std::to_string(i);
    bomb.append("a").append(n).append(": &a").append(n).append(" [*a").append(
        std::to_string(i - 1));
    for (int k = 1; k < 10; ++k) bomb.append(", *a").append(std::to_string(i - 1));
    bomb += "]\n";
  }
  auto b = ParseYaml(bomb);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("expands past"), std::string::npos) << b.status();
  std::string deep(kMaxYamlDepth + 5, '[');
  deep += std::string(kMaxYamlDepth + 5, ']');
  auto d = ParseYaml(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("deeper"), std::string::npos) << d.status();
}

}  // namespace
}  // namespace nvl72::kube
