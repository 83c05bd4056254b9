#include "kube/watch_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nvl72::kube {
namespace {

using nlohmann::json;

// Feeds `chunks` and returns the decoded values (or the first error).
StatusOr<std::vector<json>> DecodeChunks(const std::vector<std::string>& chunks) {
  JsonStreamDecoder d;
  std::vector<json> out;
  for (const auto& c : chunks) {
    Status s = d.Feed(c, [&](json&& v) {
      out.push_back(std::move(v));
      return Status::Ok();
    });
    if (!s.ok()) return s;
  }
  return out;
}

const std::string kStream =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"},"data":{"k":"v}{\"]["}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"metadata":{"name":"b\\","resourceVersion":"2"},"list":[1,[2,{}]]}})"
    R"(  {"type":"DELETED","object":{"metadata":{"name":"c","resourceVersion":"3"},"s":"\u00e9\"{"}} )"
    "\r\n\t";

TEST(JsonStreamDecoderTest, WholeStreamInOneChunk) {
  auto v = DecodeChunks({kStream});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0]["object"]["data"]["k"], "v}{\"][");
  EXPECT_EQ((*v)[1]["object"]["metadata"]["name"], "b\\");
  EXPECT_EQ((*v)[2]["type"], "DELETED");
}

TEST(JsonStreamDecoderTest, SplitAtEveryBytePosition) {
  auto whole = DecodeChunks({kStream});
  ASSERT_TRUE(whole.ok());
  for (size_t i = 0; i <= kStream.size(); ++i) {
    auto v = DecodeChunks({kStream.substr(0, i), kStream.substr(i)});
    ASSERT_TRUE(v.ok()) << "split at " << i << ": " << v.status();
    EXPECT_EQ(*v, *whole) << "split at " << i;
  }
}

TEST(JsonStreamDecoderTest, SplitAtEveryPairOfPositions) {
  auto whole = DecodeChunks({kStream});
  ASSERT_TRUE(whole.ok());
  for (size_t i = 0; i <= kStream.size(); i += 3) {
    for (size_t j = i; j <= kStream.size(); j += 5) {
      auto v = DecodeChunks({kStream.substr(0, i), kStream.substr(i, j - i), kStream.substr(j)});
      ASSERT_TRUE(v.ok()) << i << "," << j;
      EXPECT_EQ(*v, *whole);
    }
  }
}

TEST(JsonStreamDecoderTest, OneByteAtATime) {
  std::vector<std::string> chunks;
  for (char c : kStream) chunks.emplace_back(1, c);
  auto v = DecodeChunks(chunks);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 3u);
}

TEST(JsonStreamDecoderTest, PartialValueIsReported) {
  JsonStreamDecoder d;
  int n = 0;
  ASSERT_TRUE(d.Feed(R"({"a":1} {"b":)", [&](json&&) {
                 ++n;
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(n, 1);
  EXPECT_TRUE(d.HasPartialValue());
  ASSERT_TRUE(d.Feed("2}  \n", [&](json&&) {
                 ++n;
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(n, 2);
  EXPECT_FALSE(d.HasPartialValue());
  EXPECT_EQ(d.BufferedBytes(), 0u);
}

TEST(JsonStreamDecoderTest, GarbageBetweenValuesIsAnError) {
  auto v = DecodeChunks({R"({"a":1} xyz {"b":2})"});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
  EXPECT_NE(v.status().message().find("expected '{'"), std::string::npos);
}

TEST(JsonStreamDecoderTest, MalformedValueIsAnErrorAndSticky) {
  JsonStreamDecoder d;
  auto noop = [](json&&) { return Status::Ok(); };
  Status s = d.Feed(R"({"a":tru})", noop);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("malformed JSON"), std::string::npos);
  EXPECT_FALSE(d.Feed(R"({"a":1})", noop).ok());
}

TEST(JsonStreamDecoderTest, TopLevelScalarIsAnError) {
  EXPECT_FALSE(DecodeChunks({"42"}).ok());
  EXPECT_FALSE(DecodeChunks({"\"x\""}).ok());
}

TEST(JsonStreamDecoderTest, ValueSizeLimit) {
  JsonStreamDecoder d(16);
  Status s = d.Feed(R"({"aaaaaaaaaaaaaaaaaaaaaaaa)", [](json&&) { return Status::Ok(); });
  EXPECT_FALSE(s.ok());
}

TEST(JsonStreamDecoderTest, CallbackErrorStopsDecoding) {
  JsonStreamDecoder d;
  int n = 0;
  Status s = d.Feed(R"({"a":1}{"b":2})", [&](json&&) {
    ++n;
    return Status(StatusCode::kCancelled, "enough");
  });
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(n, 1);
}

TEST(ParseWatchEventTest, Types) {
  auto ev = ParseWatchEvent(json::parse(R"({"type":"ADDED","object":{"metadata":{"name":"x"}}})"));
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, WatchEventType::kAdded);
  EXPECT_EQ(Name(ev->object), "x");
  auto bm = ParseWatchEvent(
      json::parse(R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}})"));
  ASSERT_TRUE(bm.ok());
  EXPECT_EQ(bm->type, WatchEventType::kBookmark);
  EXPECT_FALSE(ParseWatchEvent(json::parse(R"({"type":"WEIRD","object":{}})")).ok());
  EXPECT_FALSE(ParseWatchEvent(json::parse(R"({"type":"ADDED"})")).ok());
}

TEST(ParseWatchEventTest, ErrorEvent410IsGone) {
  auto ev = ParseWatchEvent(json::parse(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",
          "message":"too old resource version: 1 (500)","reason":"Expired","code":410}})j"));
  ASSERT_FALSE(ev.ok());
  EXPECT_TRUE(IsGone(ev.status()));
  EXPECT_EQ(HttpCode(ev.status()), 410);
  EXPECT_EQ(Reason(ev.status()), "Expired");
  // Older servers: reason Gone.
  auto old = ParseWatchEvent(json::parse(
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Gone","message":"x"}})"));
  EXPECT_TRUE(IsGone(old.status()));
}

}  // namespace
}  // namespace nvl72::kube
