// Multi-node NVLink for the gangs nvl72-operator admits: an IMEX ComputeDomain
// (resource.nvidia.com/v1beta1, NVIDIA's DRA driver) per segment, and a channel claim in every rank
// pod, so that the ranks of a segment reach each other over NVLink on GB200 (docs/crd.md).
//
// What is written for job J with S segments (spec.fabric ComputeDomain, or unset and the default
// of --compute-domains says so):
//  - ComputeDomains "J-seg-0" .. "J-seg-(S-1)": controller-owned by J, labelled nvl72.dev/job=J,
//    spec.channel.resourceClaimTemplate.name "J-seg-s-channel", numNodes = the segment size;
//  - NVIDIA's controller creates that ResourceClaimTemplate; a rank pod of segment s is created
//    only once it exists (else kube-controller-manager could not make the pod's claim), with
//    spec.resourceClaims += {name: nvl72-channel, resourceClaimTemplateName: J-seg-s-channel} and
//    the claim listed in every container's resources.claims (the template's own claims stay);
//  - kube-scheduler's DynamicResources plugin allocates the claim on the rank's planned node; the
//    driver labels the node resource.nvidia.com/computeDomain=<uid> (model/job_nodes.h keeps other
//    gangs' ranks off such nodes).
// The job's ComputeDomainReady condition follows their status. The garbage collector deletes
// them with the job; Finalize deletes them too.
//
// Thread-safety: the free functions are pure; ComputeDomainWriter is safe to call from many
// threads.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/resource.h"
#include "model/job_spec.h"

namespace nvl72::op {

using Json = nlohmann::json;

// --compute-domains: the default of spec.fabric. auto = ComputeDomain when the API server serves
// ComputeDomains (asked again every 10 s while it does not: NVIDIA's driver is often installed
// after the operator); on = ComputeDomain (the operator refuses to start without the CRD); off =
// None.
enum class ComputeDomainsMode { kAuto, kOn, kOff };
std::optional<ComputeDomainsMode> ParseComputeDomainsMode(std::string_view name);

kube::ResourceRef ComputeDomainsResource();          // resource.nvidia.com/v1beta1 computedomains
kube::ResourceRef ResourceClaimTemplatesResource();  // resource.k8s.io/v1 resourceclaimtemplates

// Whether the job's ranks use ComputeDomains: status.fabric, written at admission
// (ComputeDomainWriter::Wanted then) so that a job keeps what it was admitted with when the CRD
// comes or goes. A job admitted before status.fabric existed uses none.
bool UsesComputeDomains(const Json& job);

// The pod-level name of the channel claim in rank pods.
inline constexpr std::string_view kChannelClaimName = "nvl72-channel";

// "<job>-seg-<segment>" and "<job>-seg-<segment>-channel".
std::string ComputeDomainName(std::string_view job_name, int segment);
std::string ChannelTemplateName(std::string_view job_name, int segment);

Json BuildComputeDomain(const Json& job, const model::JobSpec& spec, int segment);

// Adds the channel claim to a rank pod (see the top). Nothing when the pod already has a claim of
// that name.
void AddChannelClaim(Json& pod, std::string_view template_name);

// What one segment's ComputeDomain looks like now.
struct SegmentDomain {
  std::string name;
  std::string template_name;    // its channel ResourceClaimTemplate (ChannelTemplateName)
  bool exists = false;          // ours (owned by the job) and not being deleted
  bool template_ready = false;  // the driver created its ResourceClaimTemplate
  bool ready = false;           // status.status Ready
  int nodes = 0;                // entries of status.nodes
  std::string problem;          // why it is not usable ("belongs to another owner", ...)
};

// The ComputeDomainReady condition for `segments`.
struct DomainCondition {
  std::string status;  // "True" | "False"
  std::string reason;  // Ready, NotReady, TemplatePending, Unusable
  std::string message;
};
DomainCondition ComputeDomainCondition(const std::vector<SegmentDomain>& segments,
                                       int segment_size);

// Why rank pods are held back: "rank pods of segment 1 wait for ResourceClaimTemplate
// J-seg-1-channel ..." for the first segment whose channel template does not exist yet, else "".
std::string TemplateWait(const std::vector<SegmentDomain>& segments);

// When to look at a job's ComputeDomains again while its ComputeDomainReady condition (in
// `status`) is not True: `first` during the first minute (they are forming), then every 15 s (a
// domain that stays NotReady, a driver that is not running: no need to ask every 2 s).
std::chrono::milliseconds ComputeDomainRecheck(const Json& status,
                                               std::chrono::system_clock::time_point now,
                                               std::chrono::milliseconds first);

// Creates and deletes the ComputeDomains of jobs, and knows whether the API server serves them.
class ComputeDomainWriter {
 public:
  struct Options {
    ComputeDomainsMode mode = ComputeDomainsMode::kAuto;
    std::string field_manager = "nvl72-operator";
    // auto: a server that served no ComputeDomains is asked again after this (one List of at most
    // one object: cheap, and a job admitted meanwhile keeps going without ComputeDomains).
    std::chrono::seconds reprobe{10};
  };
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `client` must outlive the writer. `clock` defaults to steady_clock::now.
  ComputeDomainWriter(kube::Client* client, Options options, Clock clock = nullptr);

  // The first probe. Mode on: an error when the server serves no ComputeDomains.
  Status Start();

  // Whether the API server serves ComputeDomains (in auto asked again once `reprobe` has passed
  // since a probe that found none). Always false when off.
  bool Served();

  // Whether the job's ranks get a ComputeDomain: spec.fabric, else the mode (auto: Served()).
  bool Wanted(const model::JobSpec& spec);

  // Why the job cannot be admitted now, "" when it can: spec.fabric ComputeDomain on a server that
  // serves no ComputeDomains.
  std::string Unavailable(const model::JobSpec& spec);

  // Creates the job's missing ComputeDomains and reads them and their templates. One entry per
  // segment. Errors mean "retry". A 404 (the CRD is gone) is no error: every segment gets a
  // problem saying so, and Served() is false until a probe finds the CRD again.
  StatusOr<std::vector<SegmentDomain>> Ensure(const Json& job, const model::JobSpec& spec);

  // Deletes the ComputeDomains a job admitted with them owns (UsesComputeDomains, whatever the
  // mode is now). OK when there are none or none are served.
  Status Delete(const Json& job);

 private:
  StatusOr<bool> Probe();
  std::vector<SegmentDomain> NotServedAnyMore(const Json& job, std::vector<SegmentDomain>& out);
  Status EnsureSegment(const Json& job, const model::JobSpec& spec, int segment,
                       const std::vector<Json>& listed, SegmentDomain* out);
  StatusOr<bool> TemplateExists(const Json& job, const Json& domain, int segment);

  kube::Client* client_;
  Options options_;
  Clock clock_;
  std::mutex mu_;
  bool served_ = false;                                             // guarded by mu_
  std::optional<std::chrono::steady_clock::time_point> probed_at_;  // guarded by mu_
  std::set<std::string> templates_seen_;  // uids of domains whose template exists; guarded by mu_
};

}  // namespace nvl72::op
