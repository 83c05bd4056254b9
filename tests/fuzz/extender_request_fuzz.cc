// Fuzz target: the extender's request path. The first byte picks the verb (filter, prioritize,
// bind, preempt, or an unknown one); the rest is the HTTP body, handled by the same Service the
// HTTP server calls, against a fixed view of two racks with one admitted gang. Every answer must be
// an HTTP code the extender documents (200, 400 for a bad body, 404 for an unknown verb) with a
// JSON body, and never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "kube/fake_client.h"
#include "scheduler-plugin/cluster_cache.h"
#include "scheduler-plugin/extender.h"
#include "scheduler-plugin/fixtures_for_test.h"
#include "scheduler-plugin/service.h"

namespace {
namespace ext = nvl72::extender;

struct Fixture {
  Fixture() {
    nodes = ext::testing::MakeRacks(2, 4);
    pods = {ext::testing::MakePod("ml", "g-0", 4, "r000-n00", "g", 0, "r000-n00"),
            ext::testing::MakePod("ml", "g-1", 4, "", "g", 1, "r000-n01"),
            ext::testing::MakePod("ml", "half", 2, "r001-n00")};
    jobs = {ext::testing::MakeJob("ml", "g", 4, {"r000-n00", "r000-n01"}, "rack-0")};
    ext::ViewOptions vo;
    vo.spares_per_domain = 1;
    views = std::make_unique<ext::StaticViewSource>(ext::BuildView(
        ext::testing::Ptrs(nodes), ext::testing::Ptrs(pods), ext::testing::Ptrs(jobs), vo));
    ext::ExtenderOptions eo;
    eo.spares_per_domain = 1;
    auto e = ext::Extender::Create(eo);
    if (!e.ok()) std::abort();
    extender = std::move(*e);
    service = std::make_unique<ext::Service>(extender.get(), views.get(), &client, nullptr);
  }
  std::vector<nlohmann::json> nodes, pods, jobs;
  std::unique_ptr<ext::StaticViewSource> views;
  std::unique_ptr<ext::Extender> extender;
  nvl72::kube::FakeClient client;
  std::unique_ptr<ext::Service> service;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* f = new Fixture();  // shared across inputs; Service is const and stateless
  if (size == 0) return 0;
  static constexpr std::string_view kVerbs[] = {"filter", "prioritize", "bind", "preempt", "nope"};
  const std::string_view verb = kVerbs[data[0] % 5];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const ext::Response r = f->service->Handle(verb, body);
  if (r.code != 200 && r.code != 400 && r.code != 404) std::abort();
  // Every reply is JSON (the scheduler decodes it), including errors.
  if (!nlohmann::json::accept(r.body)) std::abort();
  return 0;
}
