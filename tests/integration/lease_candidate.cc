// A leader-election candidate as its own process, for the two-process Lease failover test in
// kube_client_test.cc: the test starts two of these on one Lease, SIGKILLs the one that leads and
// times how long the other takes to lead.
//
//   lease_candidate KUBECONFIG NAMESPACE LEASE IDENTITY LEADING_FILE
//
// Lease duration 6 s, renew deadline 4 s, retry period 1 s, no release on stop (a killed leader
// never releases anyway). When it starts leading it writes LEADING_FILE (its identity); it runs
// until it is killed.
#include <cstdio>
#include <fstream>
#include <stop_token>
#include <string>

#include "kube/clock.h"
#include "kube/config.h"
#include "kube/http_client.h"
#include "kube/leader_election.h"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s KUBECONFIG NAMESPACE LEASE IDENTITY LEADING_FILE\n", argv[0]);
    return 2;
  }
  auto config = nvl72::kube::LoadKubeconfig(argv[1]);
  if (!config.ok()) {
    std::fprintf(stderr, "lease_candidate: %s\n", config.status().ToString().c_str());
    return 1;
  }
  auto client = nvl72::kube::HttpClient::Create(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "lease_candidate: %s\n", client.status().ToString().c_str());
    return 1;
  }
  const std::string identity = argv[4];
  const std::string leading_file = argv[5];
  nvl72::kube::LeaderElectionConfig c;
  c.lease_namespace = argv[2];
  c.lease_name = argv[3];
  c.identity = identity;
  c.lease_duration = 6s;
  c.renew_deadline = 4s;
  c.retry_period = 1s;
  c.release_on_cancel = false;
  c.on_started_leading = [&] {
    const std::string tmp = leading_file + ".tmp";
    { std::ofstream(tmp) << identity << "\n"; }
    std::rename(tmp.c_str(), leading_file.c_str());  // appears whole
    std::fprintf(stderr, "lease_candidate %s: leading\n", identity.c_str());
  };
  c.on_stopped_leading = [&] {
    std::fprintf(stderr, "lease_candidate %s: stopped leading\n", identity.c_str());
  };
  nvl72::kube::LeaderElector elector(client->get(), nvl72::kube::RealClock(), c);
  std::stop_source never;
  const auto status = elector.Run(never.get_token());
  std::fprintf(stderr, "lease_candidate %s: %s\n", identity.c_str(), status.ToString().c_str());
  return status.ok() ? 0 : 1;
}
