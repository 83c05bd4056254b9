#include "operator/pod_groups.h"

#include "kube/errors.h"
#include "kube/object.h"
#include "model/names.h"
#include "operator/job_objects.h"
#include "operator/log.h"

namespace nvl72::op {
namespace {

constexpr std::string_view kGroup = "scheduling.k8s.io";
// Newest first: 1.37 serves v1beta1, 1.36 v1alpha2.
constexpr std::string_view kVersions[] = {"v1beta1", "v1alpha2"};
// The one podGroupTemplate of a job's Workload: every segment has the same size.
constexpr std::string_view kTemplateName = "segment";

std::string Str(std::string_view s) { return std::string(s); }

// metadata of a Workload or PodGroup of `job`: labelled with the job, owned by it.
Json GroupMetadata(const Json& job, std::string name) {
  const std::string job_name = kube::Name(job);
  return {{"name", std::move(name)},
          {"namespace", kube::Namespace(job)},
          {"labels", {{Str(model::kJobLabel), job_name}}},
          {"ownerReferences", Json::array({JobOwnerReference(job)})}};
}

// What a podGroupTemplate and a PodGroup share: the gang policy, the topology constraint and the
// priority class of the rank pods (kube-scheduler requires a group's pods to have its priority).
void SetGroupPolicy(Json& spec, const model::JobSpec& job_spec, std::string_view topology_key) {
  spec["schedulingPolicy"] = {{"gang", {{"minCount", job_spec.EffectiveSegmentSize()}}}};
  if (!topology_key.empty()) {
    spec["schedulingConstraints"] = {{"topology", Json::array({{{"key", Str(topology_key)}}})}};
  }
  const Json& pc = kube::AtPath(job_spec.pod_template, "/spec/priorityClassName");
  if (pc.is_string() && !pc.get_ref<const std::string&>().empty()) spec["priorityClassName"] = pc;
}

// The reference from a PodGroup to its Workload's template: v1beta1 spec.workloadRef,
// v1alpha2 spec.podGroupTemplateRef.workload.
Json TemplateRef(std::string_view version, const std::string& workload) {
  if (version == "v1alpha2") {
    return {
        {"workload", {{"workloadName", workload}, {"podGroupTemplateName", Str(kTemplateName)}}}};
  }
  return {{"workloadName", workload}, {"templateName", Str(kTemplateName)}};
}

std::string_view TemplateRefField(std::string_view version) {
  return version == "v1alpha2" ? "podGroupTemplateRef" : "workloadRef";
}

bool IsRefusal(const Status& s) {
  return kube::IsForbidden(s) || kube::IsNotFound(s) || kube::IsInvalid(s);
}

}  // namespace

std::optional<PodGroupsMode> ParsePodGroupsMode(std::string_view name) {
  if (name == "auto") return PodGroupsMode::kAuto;
  if (name == "on") return PodGroupsMode::kOn;
  if (name == "off") return PodGroupsMode::kOff;
  return std::nullopt;
}

kube::ResourceRef PodGroupApi::Workloads() const {
  return kube::ResourceRef::Custom(Str(kGroup), version, "workloads", "Workload", true);
}

kube::ResourceRef PodGroupApi::PodGroups() const {
  return kube::ResourceRef::Custom(Str(kGroup), version, "podgroups", "PodGroup", true);
}

StatusOr<PodGroupApi> DiscoverPodGroupApi(kube::Client& client) {
  for (std::string_view v : kVersions) {
    PodGroupApi api{Str(v)};
    auto listed = client.List(api.PodGroups(), "", {.limit = 1});
    if (listed.ok()) return api;
    if (!kube::IsNotFound(listed.status())) return listed.status();
  }
  return PodGroupApi{};
}

std::string PodGroupName(std::string_view job_name, int segment) {
  return Str(job_name) + "-seg-" + std::to_string(segment);
}

int SegmentOfRank(const model::JobSpec& spec, int rank) {
  return rank / spec.EffectiveSegmentSize();
}

std::string TopologyKey(const model::JobSpec& spec, const model::ClusterOptions& cluster) {
  if (spec.mode != placement::TopologyMode::kRequired) return "";
  if (!cluster.domain_label_fallback.empty()) return "";
  return cluster.domain_label;
}

Json BuildWorkload(const Json& job, const model::JobSpec& spec, const PodGroupApi& api,
                   std::string_view topology_key) {
  Json tmpl = {{"name", Str(kTemplateName)}};
  SetGroupPolicy(tmpl, spec, topology_key);
  return {{"apiVersion", api.Workloads().ApiVersion()},
          {"kind", "Workload"},
          {"metadata", GroupMetadata(job, kube::Name(job))},
          {"spec",
           {{"controllerRef",
             {{"apiGroup", Str(model::kGroup)},
              {"kind", Str(model::kKind)},
              {"name", kube::Name(job)}}},
            {"podGroupTemplates", Json::array({tmpl})}}}};
}

Json BuildPodGroup(const Json& job, const model::JobSpec& spec, int segment, const PodGroupApi& api,
                   std::string_view topology_key) {
  Json pg_spec = Json::object();
  pg_spec[Str(TemplateRefField(api.version))] = TemplateRef(api.version, kube::Name(job));
  SetGroupPolicy(pg_spec, spec, topology_key);
  return {{"apiVersion", api.PodGroups().ApiVersion()},
          {"kind", "PodGroup"},
          {"metadata", GroupMetadata(job, PodGroupName(kube::Name(job), segment))},
          {"spec", std::move(pg_spec)}};
}

std::string PodGroupToJoin(std::string_view job_name, const model::JobSpec& spec, int rank,
                           const std::vector<const Json*>& pods, const std::set<int>& ready) {
  const int segment = SegmentOfRank(spec, rank);
  if (ready.count(segment) == 0) return "";
  std::string group = PodGroupName(job_name, segment);
  for (const Json* p : pods) {
    std::string job;
    int r = -1;
    if (!model::GangRankOf(*p, &job, &r) || job != job_name || r == rank ||
        SegmentOfRank(spec, r) != segment || kube::IsBeingDeleted(*p)) {
      continue;
    }
    const Json& in = kube::AtPath(*p, "/spec/schedulingGroup/podGroupName");
    if (!in.is_string() || in.get_ref<const std::string&>() != group) return "";
  }
  return group;
}

void JoinPodGroup(Json& pod, std::string_view group) {
  if (group.empty()) return;
  Json& sg = pod["spec"]["schedulingGroup"];
  if (sg.is_object() && sg.contains("podGroupName")) return;
  sg = {{"podGroupName", Str(group)}};
}

PodGroupWriter::PodGroupWriter(kube::Client* client, Options options, Clock clock)
    : client_(client), options_(std::move(options)), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

Status PodGroupWriter::Start() {
  if (options_.mode == PodGroupsMode::kOff) return Status::Ok();
  auto api = DiscoverPodGroupApi(*client_);
  if (!api.ok()) {
    if (options_.mode == PodGroupsMode::kOn) return api.status();
    NVL72_LOG(kWarning) << "PodGroups not used: discovering scheduling.k8s.io podgroups failed: "
                        << api.status().message();
    api = PodGroupApi{};
  }
  if (options_.mode == PodGroupsMode::kOn && !api->Served()) {
    return Status(StatusCode::kFailedPrecondition,
                  "--pod-groups=on, but the API server serves no scheduling.k8s.io PodGroup "
                  "(v1beta1 or v1alpha2): enable the GenericWorkload feature gate and "
                  "--runtime-config=scheduling.k8s.io/v1beta1=true, or use --pod-groups=auto");
  }
  std::lock_guard<std::mutex> l(mu_);
  api_ = *api;
  probed_at_ = clock_();
  NVL72_LOG(kInfo) << (api_.Served() ? "PodGroups: every gang segment gets a scheduling.k8s.io/" +
                                           api_.version + " PodGroup"
                                     : std::string("PodGroups: not served by the API server; "
                                                   "gangs get none (asked again every ") +
                                           std::to_string(options_.reprobe.count()) + " s)");
  return Status::Ok();
}

PodGroupApi PodGroupWriter::Api() {
  if (options_.mode == PodGroupsMode::kOff) return {};
  {
    std::lock_guard<std::mutex> l(mu_);
    const bool due = !probed_at_ || clock_() - *probed_at_ >= options_.reprobe;
    if (api_.Served() || options_.mode == PodGroupsMode::kOn || !due) return api_;
    probed_at_ = clock_();
  }
  auto api = DiscoverPodGroupApi(*client_);
  std::lock_guard<std::mutex> l(mu_);
  if (api.ok() && api->Served() && !api_.Served()) {
    NVL72_LOG(kInfo) << "PodGroups: the API server now serves scheduling.k8s.io/" << api->version
                     << " PodGroups; new gang pods join them";
    api_ = *api;
  }
  return api_;
}

// Refusals in auto mode: logged; OK (the job goes on without groups). A 404 means the API went
// away: it is set aside until the next probe. Other refusals (403: RBAC, or admission of this
// object; 422) concern this write only.
Status PodGroupWriter::Refused(const Status& s, const Json& job, std::string_view what) {
  if (!IsRefusal(s) || options_.mode == PodGroupsMode::kOn) return s;
  NVL72_LOG(kWarning).Job(kube::KeyOf(job))
      << kube::KeyOf(job) << " goes without PodGroups: the API server refused " << what << ": "
      << s.message();
  if (kube::IsNotFound(s)) {
    std::lock_guard<std::mutex> l(mu_);
    api_ = {};
    probed_at_ = clock_();
  }
  return Status::Ok();
}

void PodGroupWriter::NoteTopologyDropped(const Json& written) {
  if (!kube::AtPath(written, "/spec/schedulingConstraints").is_null()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (topology_dropped_logged_) return;
  topology_dropped_logged_ = true;
  NVL72_LOG(kWarning) << "the API server drops the topology constraint of PodGroups (feature gate "
                         "TopologyAwareWorkloadScheduling off): kube-scheduler schedules each "
                         "segment as a gang; nvl72 keeps it in one NVLink domain";
}

// Creates `object`; true when it (or an earlier copy) is this job's and not being deleted.
StatusOr<bool> PodGroupWriter::EnsureOne(const kube::ResourceRef& resource, const Json& job,
                                         const Json& object) {
  const std::string ns = kube::Namespace(job);
  auto created = client_->Create(resource, ns, object, {.field_manager = options_.field_manager});
  if (created.ok()) {
    if (!kube::AtPath(object, "/spec/schedulingConstraints").is_null()) {
      NoteTopologyDropped(*created);
    }
    return true;
  }
  if (!kube::IsAlreadyExists(created.status())) return created.status();
  auto got = client_->Get(resource, ns, kube::Name(object));
  if (!got.ok()) return got.status();
  if (kube::ControllerUid(*got) == kube::Uid(job) && !kube::IsBeingDeleted(*got)) return true;
  NVL72_LOG(kWarning).Job(kube::KeyOf(job))
      << resource.kind << " " << ns << "/" << kube::Name(object)
      << (kube::IsBeingDeleted(*got) ? " is being deleted" : " belongs to another owner")
      << ": the pods it would hold are created without it";
  return false;
}

StatusOr<std::set<int>> PodGroupWriter::Ensure(const Json& job, const model::JobSpec& spec) {
  const PodGroupApi api = Api();
  std::set<int> ready;
  if (!api.Served()) return ready;
  const std::string topology = TopologyKey(spec, options_.cluster);
  auto workload = EnsureOne(api.Workloads(), job, BuildWorkload(job, spec, api, topology));
  if (!workload.ok()) {
    NVL72_RETURN_IF_ERROR(Refused(workload.status(), job, "its Workload"));
    return ready;
  }
  if (!*workload) return ready;
  const int segments = spec.replicas / spec.EffectiveSegmentSize();
  for (int s = 0; s < segments; ++s) {
    auto group = EnsureOne(api.PodGroups(), job, BuildPodGroup(job, spec, s, api, topology));
    if (!group.ok()) {
      NVL72_RETURN_IF_ERROR(
          Refused(group.status(), job, "PodGroup " + PodGroupName(kube::Name(job), s)));
      return std::set<int>{};
    }
    if (*group) ready.insert(s);
  }
  return ready;
}

Status PodGroupWriter::Delete(const Json& job) {
  const PodGroupApi api = Api();
  if (!api.Served()) return Status::Ok();
  const std::string ns = kube::Namespace(job);
  auto owned = [&](const Json& obj) { return kube::ControllerUid(obj) == kube::Uid(job); };
  const kube::ListOptions by_job{.label_selector = Str(model::kJobLabel) + "=" + kube::Name(job)};
  for (const kube::ResourceRef& r : {api.PodGroups(), api.Workloads()}) {
    auto listed = client_->List(r, ns, by_job);
    if (!listed.ok()) return Refused(listed.status(), job, "listing its " + r.resource);
    for (const Json& obj : listed->items) {
      if (!owned(obj) || kube::IsBeingDeleted(obj)) continue;
      Status s = client_->Delete(r, ns, kube::Name(obj), {.precondition_uid = kube::Uid(obj)});
      if (!s.ok() && !kube::IsNotFound(s) && !kube::IsConflict(s)) return s;
    }
  }
  return Status::Ok();
}

}  // namespace nvl72::op
