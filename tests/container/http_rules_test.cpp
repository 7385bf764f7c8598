// The pure parts of lmx-server's request handling: JSON bounds (depth, quotes) and the HTTP
// rules Beast leaves to the server (framing refusals, Expect, target forms, media types).
#include <string>

#include <gtest/gtest.h>

#include "container/http_rules.h"
#include "plugin/json_bounds.h"

namespace lmx::server {
namespace {

namespace http = boost::beast::http;
namespace jb = lmx::json_bounds;

std::string nested(int depth, char open, char close) {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(ContainerJsonBounds, DepthIsCheckedBeforeParsing) {
  nlohmann::json j;
  EXPECT_EQ(jb::parse(nested(64, '[', ']'), j), jb::ParseStatus::Ok);
  EXPECT_EQ(jb::parse(nested(65, '[', ']'), j), jb::ParseStatus::TooDeep);
  std::string objects;
  for (int i = 0; i < 60000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(60000, '}');
  EXPECT_EQ(jb::parse(objects, j), jb::ParseStatus::TooDeep);
  // Brackets inside strings (escaped quotes included) do not count.
  EXPECT_EQ(jb::parse("{\"k\": \"\\\"" + std::string(1000, '[') + "\"}", j), jb::ParseStatus::Ok);
  EXPECT_EQ(jb::parse("{\"k\": ", j), jb::ParseStatus::Malformed);
}

TEST(ContainerJsonBounds, QuotesAreShortWhateverTheValue) {
  nlohmann::json deep = 1;
  for (int i = 0; i < 100000; ++i) {  // built iteratively; quote() must not recurse this deep
    nlohmann::json outer = nlohmann::json::object();
    outer["a"] = std::move(deep);
    deep = std::move(outer);
  }
  std::string q = jb::quote(deep);
  EXPECT_LE(q.size(), jb::kQuoteBytes + 3);
  EXPECT_EQ(q.substr(0, 10), "{\"a\":{\"a\":");
  EXPECT_LE(jb::quote(std::string(1 << 20, 'x')).size(), jb::kQuoteBytes + 3);
  nlohmann::json big_key = {{std::string(1 << 20, 'k'), 1}};
  EXPECT_LE(jb::quote(big_key).size(), jb::kQuoteBytes + 3);
  EXPECT_EQ(jb::quote(nlohmann::json{1, "a", nullptr}), "[1,\"a\",null]");
  EXPECT_EQ(jb::quote(42), "42");
  // A cut never splits a UTF-8 character.
  std::string euros;
  for (int i = 0; i < 40; ++i) euros += "\xe2\x82\xac";
  std::string cut = jb::clip(euros, 64);
  EXPECT_EQ(cut, euros.substr(0, 63) + "...");
}

RequestHeader header(const std::vector<std::pair<http::field, std::string>>& fields,
                     unsigned version = 11) {
  RequestHeader h;
  h.version(version);
  h.method(http::verb::post);
  for (const auto& [f, v] : fields) h.insert(f, v);
  return h;
}

TEST(ContainerHttpRules, TransferCodingsTheServerCannotTrustAreRefused) {
  using F = http::field;
  EXPECT_FALSE(check_framing(header({})));
  EXPECT_FALSE(check_framing(header({{F::transfer_encoding, "chunked"}})));
  EXPECT_FALSE(check_framing(header({{F::transfer_encoding, "Chunked"}})));
  auto status = [](const std::optional<Refusal>& r) { return r ? r->status : 0; };
  EXPECT_EQ(status(check_framing(header({{F::transfer_encoding, "gzip"}}))), 501);
  EXPECT_EQ(
      status(check_framing(header({{F::transfer_encoding, "gzip"}, {F::content_length, "5"}}))),
      501);
  EXPECT_EQ(status(check_framing(header({{F::transfer_encoding, "gzip, chunked"}}))), 501);
  EXPECT_EQ(status(check_framing(
                header({{F::transfer_encoding, "chunked"}, {F::transfer_encoding, "identity"}}))),
            501);
  EXPECT_EQ(status(check_framing(header({{F::transfer_encoding, "chunked, chunked"}}))), 400);
  EXPECT_EQ(status(check_framing(header({{F::transfer_encoding, " , "}}))), 400);
  EXPECT_EQ(status(check_framing(header({{F::transfer_encoding, "chunked"}}, 10))), 400);
  EXPECT_EQ(
      status(check_framing(header({{F::transfer_encoding, "chunked"}, {F::content_length, "5"}}))),
      400);
}

TEST(ContainerHttpRules, Expect) {
  std::optional<Refusal> r;
  EXPECT_TRUE(expects_continue(header({{http::field::expect, "100-Continue"}}), r));
  EXPECT_FALSE(r);
  EXPECT_FALSE(expects_continue(header({{http::field::expect, "100-continue"}}, 10), r));
  EXPECT_FALSE(r);
  EXPECT_FALSE(expects_continue(header({}), r));
  EXPECT_FALSE(expects_continue(header({{http::field::expect, "fast"}}), r));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 417);
}

TEST(ContainerHttpRules, TargetForms) {
  EXPECT_EQ(request_path("/ping"), "/ping");
  EXPECT_EQ(request_path("/ping?x=1"), "/ping");
  EXPECT_EQ(request_path("http://127.0.0.1:8080/ping"), "/ping");
  EXPECT_EQ(request_path("HTTPS://host/invocations?a=b"), "/invocations");
  EXPECT_EQ(request_path("http://host"), "/");
  EXPECT_EQ(request_path("http://host?x"), "/");
  EXPECT_EQ(request_path("*"), "");
  EXPECT_EQ(request_path("ftp://host/ping"), "");
  EXPECT_EQ(request_path("host:8080"), "");
}

TEST(ContainerHttpRules, BodiesReadAsJsonOrTextOnlyOthersRefused) {
  for (const char* ok : {"", "application/json", "Application/JSON; charset=UTF-8", "text/plain",
                         "application/x-www-form-urlencoded", "application/octet-stream",
                         "application/vnd.api+json"})
    EXPECT_TRUE(readable_body_type(ok)) << ok;
  for (const char* refused : {"application/xml", "text/html", "image/png", "multipart/form-data",
                              "text/json+x", "application/jsonx"})
    EXPECT_FALSE(readable_body_type(refused)) << refused;
}

TEST(ContainerHttpRules, MediaTypesAreCaseInsensitive) {
  EXPECT_EQ(media_type("TEXT/PLAIN"), "text/plain");
  EXPECT_EQ(media_type(" Application/JSON ; charset=UTF-8"), "application/json");
  EXPECT_EQ(media_type(""), "");
}

}  // namespace
}  // namespace lmx::server
