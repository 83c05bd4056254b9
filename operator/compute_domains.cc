#include "operator/compute_domains.h"

#include "kube/errors.h"
#include "kube/object.h"
#include "model/names.h"
#include "operator/job_objects.h"
#include "operator/log.h"

namespace nvl72::op {
namespace {

std::string Str(std::string_view s) { return std::string(s); }

std::string Segments(int n) { return std::to_string(n) + (n == 1 ? " segment" : " segments"); }

const Json* FindByName(const std::vector<Json>& objects, const std::string& name) {
  for (const Json& o : objects) {
    if (kube::Name(o) == name) return &o;
  }
  return nullptr;
}

// Appends {name: kChannelClaimName} to resources.claims of `container`.
void ListClaim(Json& container) {
  Json& claims = container["resources"]["claims"];
  if (!claims.is_array()) claims = Json::array();
  claims.push_back({{"name", Str(kChannelClaimName)}});
}

}  // namespace

std::optional<ComputeDomainsMode> ParseComputeDomainsMode(std::string_view name) {
  if (name == "auto") return ComputeDomainsMode::kAuto;
  if (name == "on") return ComputeDomainsMode::kOn;
  if (name == "off") return ComputeDomainsMode::kOff;
  return std::nullopt;
}

kube::ResourceRef ComputeDomainsResource() {
  return kube::ResourceRef::Custom("resource.nvidia.com", "v1beta1", "computedomains",
                                   "ComputeDomain", true);
}

kube::ResourceRef ResourceClaimTemplatesResource() {
  return kube::ResourceRef::Custom("resource.k8s.io", "v1", "resourceclaimtemplates",
                                   "ResourceClaimTemplate", true);
}

bool UsesComputeDomains(const Json& job) {
  return kube::AtPath(job, "/status/fabric") == "ComputeDomain";
}

std::string ComputeDomainName(std::string_view job_name, int segment) {
  return Str(job_name) + "-seg-" + std::to_string(segment);
}

std::string ChannelTemplateName(std::string_view job_name, int segment) {
  return ComputeDomainName(job_name, segment) + "-channel";
}

Json BuildComputeDomain(const Json& job, const model::JobSpec& spec, int segment) {
  const std::string job_name = kube::Name(job);
  return {{"apiVersion", ComputeDomainsResource().ApiVersion()},
          {"kind", "ComputeDomain"},
          {"metadata",
           {{"name", ComputeDomainName(job_name, segment)},
            {"namespace", kube::Namespace(job)},
            {"labels", {{Str(model::kJobLabel), job_name}}},
            {"ownerReferences", Json::array({JobOwnerReference(job)})}}},
          {"spec",
           {{"numNodes", spec.EffectiveSegmentSize()},
            {"channel",
             {{"resourceClaimTemplate", {{"name", ChannelTemplateName(job_name, segment)}}}}}}}};
}

void AddChannelClaim(Json& pod, std::string_view template_name) {
  Json& spec = pod["spec"];
  Json& claims = spec["resourceClaims"];
  if (!claims.is_array()) claims = Json::array();
  for (const Json& c : claims) {
    if (c.is_object() && c.value("name", "") == kChannelClaimName) return;
  }
  claims.push_back(
      {{"name", Str(kChannelClaimName)}, {"resourceClaimTemplateName", Str(template_name)}});
  Json& containers = spec["containers"];
  if (!containers.is_array()) return;
  for (Json& c : containers) {
    if (c.is_object()) ListClaim(c);
  }
}

std::string TemplateWait(const std::vector<SegmentDomain>& segments) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const SegmentDomain& s = segments[i];
    if (s.exists && !s.template_ready) {
      return "rank pods of segment " + std::to_string(i) + " wait for ResourceClaimTemplate " +
             s.template_name + ", which NVIDIA's DRA driver creates for ComputeDomain " + s.name;
    }
  }
  return "";
}

DomainCondition ComputeDomainCondition(const std::vector<SegmentDomain>& segments,
                                       int segment_size) {
  for (const SegmentDomain& s : segments) {
    if (!s.problem.empty())
      return {"False", "Unusable", "ComputeDomain " + s.name + " " + s.problem};
  }
  for (const SegmentDomain& s : segments) {
    if (!s.template_ready) {
      return {"False", "TemplatePending",
              "waiting for NVIDIA's DRA driver to create ResourceClaimTemplate " + s.template_name +
                  " of ComputeDomain " + s.name +
                  " (is the driver's controller running?); its rank pods are created after it"};
    }
  }
  for (const SegmentDomain& s : segments) {
    if (!s.ready) {
      return {"False", "NotReady",
              "ComputeDomain " + s.name + " not Ready: " + std::to_string(s.nodes) + " of " +
                  std::to_string(segment_size) + " nodes joined"};
    }
  }
  return {"True", "Ready",
          "ComputeDomains Ready for " + Segments(static_cast<int>(segments.size())) + " (" +
              std::to_string(segment_size) + " nodes each)"};
}

std::chrono::milliseconds ComputeDomainRecheck(const Json& status,
                                               std::chrono::system_clock::time_point now,
                                               std::chrono::milliseconds first) {
  const Json& conditions = kube::AtPath(status, "/conditions");
  for (const Json& c : conditions.is_array() ? conditions : Json::array()) {
    if (!c.is_object() || c.value("type", "") != model::kConditionComputeDomainReady) continue;
    auto since = kube::ParseTime(c.value("lastTransitionTime", ""));
    if (since.ok() && now - *since >= std::chrono::minutes(1)) return std::chrono::seconds(15);
  }
  return first;
}

ComputeDomainWriter::ComputeDomainWriter(kube::Client* client, Options options, Clock clock)
    : client_(client), options_(std::move(options)), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

// Lists one ComputeDomain: a 404 means the CRD is not installed.
StatusOr<bool> ComputeDomainWriter::Probe() {
  auto listed = client_->List(ComputeDomainsResource(), "", {.limit = 1});
  if (listed.ok()) return true;
  if (kube::IsNotFound(listed.status())) return false;
  return listed.status();
}

Status ComputeDomainWriter::Start() {
  if (options_.mode == ComputeDomainsMode::kOff) return Status::Ok();
  auto served = Probe();
  if (!served.ok()) {
    if (options_.mode == ComputeDomainsMode::kOn) return served.status();
    NVL72_LOG(kWarning) << "ComputeDomains not used: probing resource.nvidia.com computedomains "
                           "failed: "
                        << served.status().message();
    served = false;
  }
  if (options_.mode == ComputeDomainsMode::kOn && !*served) {
    return Status(StatusCode::kFailedPrecondition,
                  "--compute-domains=on, but the API server serves no "
                  "computedomains.resource.nvidia.com/v1beta1: install NVIDIA's DRA driver (its "
                  "ComputeDomain CRD), or use --compute-domains=auto");
  }
  std::lock_guard<std::mutex> l(mu_);
  served_ = *served;
  probed_at_ = clock_();
  NVL72_LOG(kInfo) << (served_ ? std::string("ComputeDomains: every gang segment gets an IMEX "
                                             "ComputeDomain unless its spec.fabric is None")
                               : "ComputeDomains: not served by the API server; gangs get none "
                                 "(asked again every " +
                                     std::to_string(options_.reprobe.count()) + " s)");
  return Status::Ok();
}

bool ComputeDomainWriter::Served() {
  if (options_.mode == ComputeDomainsMode::kOff) return false;
  {
    std::lock_guard<std::mutex> l(mu_);
    const bool due = !probed_at_ || clock_() - *probed_at_ >= options_.reprobe;
    if (served_ || !due) return served_;
    probed_at_ = clock_();
  }
  auto served = Probe();
  std::lock_guard<std::mutex> l(mu_);
  if (served.ok() && *served && !served_) {
    NVL72_LOG(kInfo) << "ComputeDomains: the API server now serves "
                        "computedomains.resource.nvidia.com; new gangs get one per segment";
    served_ = true;
  }
  return served_;
}

bool ComputeDomainWriter::Wanted(const model::JobSpec& spec) {
  if (spec.fabric) return *spec.fabric == model::Fabric::kComputeDomain;
  if (options_.mode == ComputeDomainsMode::kOff) return false;
  return options_.mode == ComputeDomainsMode::kOn || Served();
}

std::string ComputeDomainWriter::Unavailable(const model::JobSpec& spec) {
  if (!spec.fabric || *spec.fabric != model::Fabric::kComputeDomain) return "";
  if (options_.mode != ComputeDomainsMode::kOff && Served()) return "";
  return std::string(model::kFabricUnavailable) +
         std::string(options_.mode == ComputeDomainsMode::kOff
                         ? "the operator runs with --compute-domains=off"
                         : "the API server serves no computedomains.resource.nvidia.com (install "
                           "NVIDIA's DRA driver)") +
         "; set spec.fabric None to run without multi-node NVLink";
}

StatusOr<bool> ComputeDomainWriter::TemplateExists(const Json& job, const Json& domain,
                                                   int segment) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (templates_seen_.count(kube::Uid(domain)) != 0) return true;
  }
  auto got = client_->Get(ResourceClaimTemplatesResource(), kube::Namespace(job),
                          ChannelTemplateName(kube::Name(job), segment));
  if (!got.ok()) {
    if (kube::IsNotFound(got.status())) return false;
    return got.status();
  }
  std::lock_guard<std::mutex> l(mu_);
  templates_seen_.insert(kube::Uid(domain));
  return true;
}

Status ComputeDomainWriter::EnsureSegment(const Json& job, const model::JobSpec& spec, int segment,
                                          const std::vector<Json>& listed, SegmentDomain* out) {
  out->name = ComputeDomainName(kube::Name(job), segment);
  out->template_name = ChannelTemplateName(kube::Name(job), segment);
  const Json* found = FindByName(listed, out->name);
  Json domain;
  if (found != nullptr) {
    domain = *found;
  } else {
    auto created = client_->Create(ComputeDomainsResource(), kube::Namespace(job),
                                   BuildComputeDomain(job, spec, segment),
                                   {.field_manager = options_.field_manager});
    if (created.ok()) {
      NVL72_LOG(kInfo).Job(kube::KeyOf(job)) << "created ComputeDomain " << out->name;
      domain = std::move(*created);
    } else if (kube::IsAlreadyExists(created.status())) {
      out->problem = "exists without label " + Str(model::kJobLabel) + "=" + kube::Name(job);
      return Status::Ok();
    } else {
      return created.status();
    }
  }
  if (kube::ControllerUid(domain) != kube::Uid(job)) {
    out->problem = "belongs to another owner";
  } else if (kube::IsBeingDeleted(domain)) {
    out->problem = "is being deleted";
  }
  if (!out->problem.empty()) return Status::Ok();
  out->exists = true;
  out->ready = kube::AtPath(domain, "/status/status") == "Ready";
  const Json& nodes = kube::AtPath(domain, "/status/nodes");
  out->nodes = nodes.is_array() ? static_cast<int>(nodes.size()) : 0;
  auto ready = TemplateExists(job, domain, segment);
  if (!ready.ok()) return ready.status();
  out->template_ready = *ready;
  return Status::Ok();
}

StatusOr<std::vector<SegmentDomain>> ComputeDomainWriter::Ensure(const Json& job,
                                                                 const model::JobSpec& spec) {
  const kube::ListOptions by_job{.label_selector = Str(model::kJobLabel) + "=" + kube::Name(job)};
  auto listed = client_->List(ComputeDomainsResource(), kube::Namespace(job), by_job);
  const int segments = spec.replicas / spec.EffectiveSegmentSize();
  std::vector<SegmentDomain> out(static_cast<size_t>(segments));
  if (!listed.ok() && kube::IsNotFound(listed.status())) return NotServedAnyMore(job, out);
  if (!listed.ok()) return listed.status();
  for (int s = 0; s < segments; ++s) {
    NVL72_RETURN_IF_ERROR(EnsureSegment(job, spec, s, listed->items, &out[static_cast<size_t>(s)]));
  }
  return out;
}

// The CRD went away under a job that uses ComputeDomains (NVIDIA's driver uninstalled): every
// segment is Unusable with that reason, and new jobs go without until the CRD is back.
std::vector<SegmentDomain> ComputeDomainWriter::NotServedAnyMore(const Json& job,
                                                                 std::vector<SegmentDomain>& out) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (served_) {
      NVL72_LOG(kWarning) << "ComputeDomains: the API server no longer serves "
                             "computedomains.resource.nvidia.com; new gangs get none";
    }
    served_ = false;
    probed_at_ = clock_();
  }
  for (size_t s = 0; s < out.size(); ++s) {
    out[s].name = ComputeDomainName(kube::Name(job), static_cast<int>(s));
    out[s].template_name = ChannelTemplateName(kube::Name(job), static_cast<int>(s));
    out[s].problem =
        "cannot be made: the API server no longer serves "
        "computedomains.resource.nvidia.com (NVIDIA's DRA driver uninstalled?)";
  }
  return out;
}

Status ComputeDomainWriter::Delete(const Json& job) {
  if (!UsesComputeDomains(job)) return Status::Ok();
  const std::string ns = kube::Namespace(job);
  const kube::ListOptions by_job{.label_selector = Str(model::kJobLabel) + "=" + kube::Name(job)};
  auto listed = client_->List(ComputeDomainsResource(), ns, by_job);
  if (!listed.ok()) return kube::IsNotFound(listed.status()) ? Status::Ok() : listed.status();
  for (const Json& d : listed->items) {
    if (kube::ControllerUid(d) != kube::Uid(job) || kube::IsBeingDeleted(d)) continue;
    Status s = client_->Delete(ComputeDomainsResource(), ns, kube::Name(d),
                               {.precondition_uid = kube::Uid(d)});
    if (!s.ok() && !kube::IsNotFound(s) && !kube::IsConflict(s)) return s;
    std::lock_guard<std::mutex> l(mu_);
    templates_seen_.erase(kube::Uid(d));
  }
  return Status::Ok();
}

}  // namespace nvl72::op
