#!/usr/bin/env python3
"""The driver of bench/native_vs_nvl72.sh: one system's run of the side-by-side workload.

  native_vs_nvl72.py workload --trace CSV --racks N --load F --arrival-seconds S --singles N --seed N
      prints the workload (JSON): jobs drawn from the trace's job shapes, arrival times, the burst.
  native_vs_nvl72.py run --system native|nvl72 --workload FILE --namespace NS [--grace S]
      submits the workload to the API server of $NVL72_APISERVER_URL (token $NVL72_TOKEN, CA
      $NVL72_CA_FILE), fails one node of the busiest rack (scripts/local-cluster kubelet stop), sends
      the burst of single pods, and prints the measurements (JSON) on stdout.
  native_vs_nvl72.py release --namespace NS
      takes the finalizers off the namespace's pods (cleanup after a run).

Job shapes (trace README): a job of 1, 2 or 4 GPUs is one pod of that many GPUs; a job of 8, 16, 32
or 64 GPUs is a gang of 2, 4, 8 or 16 whole 4-GPU nodes that must share one NVLink domain.
native: each gang is a scheduling.k8s.io/v1beta1 PodGroup (gang minCount, topology constraint on
nvidia.com/gpu.clique) and an Indexed batch/v1 Job whose pods join it; singles are plain pods; the
stock kube-scheduler places everything, the Job controller replaces a pod that taint eviction
removed, as soon as it is terminating. nvl72: each gang is an NVL72Job (Required, recovery InPlace); singles name the
nvl72-scheduler profile (kube-scheduler + nvl72-extender).
"""
import argparse
import concurrent.futures
import csv
import json
import os
import random
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

GANG_NODES = {8: 2, 16: 4, 32: 8, 64: 16}
NODES_PER_RACK = 18
GPUS_PER_NODE = 4
CLIQUE = "nvidia.com/gpu.clique"


# ---- workload -------------------------------------------------------------------------------
def trace_shapes(path):
    with open(path) as f:
        return [int(row["num_gpu"]) for row in csv.DictReader(f) if int(row["num_gpu"]) in
                (1, 2, 4, 8, 16, 32, 64)]


def make_workload(a):
    rnd = random.Random(a.seed)
    shapes = trace_shapes(a.trace)
    target = a.load * a.racks * NODES_PER_RACK * GPUS_PER_NODE
    jobs, gpus = [], 0
    while gpus < target:
        g = rnd.choice(shapes)
        if g in GANG_NODES and GANG_NODES[g] > NODES_PER_RACK - 2:
            continue  # a gang must fit one rack next to its spares
        i = len(jobs)
        if g in GANG_NODES:
            jobs.append({"name": f"g{i}", "kind": "gang", "nodes": GANG_NODES[g], "gpus": g})
        else:
            jobs.append({"name": f"s{i}", "kind": "single", "gpus": g})
        gpus += g
    for j in jobs:
        j["at"] = round(rnd.uniform(0, a.arrival_seconds), 2)
    jobs.sort(key=lambda j: j["at"])
    singles = [s for s in shapes if s <= 4]
    burst = [{"name": f"b{i}", "kind": "single", "gpus": rnd.choice(singles)}
             for i in range(a.singles)]
    return {"racks": a.racks, "gpus": gpus, "jobs": jobs, "burst": burst,
            "shape_source": os.path.basename(a.trace)}


# ---- API ------------------------------------------------------------------------------------
class Api:
    def __init__(self):
        self.url = os.environ["NVL72_APISERVER_URL"]
        self.ctx = ssl.create_default_context(cafile=os.environ["NVL72_CA_FILE"])
        self.token = os.environ["NVL72_TOKEN"]

    def call(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            raise RuntimeError(f"{method} {path}: HTTP {e.code}: {detail}") from None


def now():
    return time.monotonic()


def tolerations(grace):
    return [{"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": grace}
            for k in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]


def container(gpus):
    return [{"name": "c", "image": "busybox",
             "resources": {"requests": {"cpu": "100m"},
                           "limits": {"nvidia.com/gpu": str(gpus)}}}]


def single_pod(ns, name, gpus, scheduler):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"bench/job": name}},
            "spec": {"schedulerName": scheduler, "containers": container(gpus)}}


def submit(api, system, ns, job, grace):
    name = job["name"]
    if job["kind"] == "single":
        sched = "default-scheduler" if system == "native" else "nvl72-scheduler"
        api.call("POST", f"/api/v1/namespaces/{ns}/pods", single_pod(ns, name, job["gpus"], sched))
        return
    n = job["nodes"]
    if system == "native":
        api.call("POST", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups", {
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": n}},
                     "schedulingConstraints": {"topology": [{"key": CLIQUE}]}}})
        api.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n,
                     # a rank evicted from a dead node is replaced while it still terminates
                     # there (with a podFailurePolicy only "Failed" would be allowed, and a pod on
                     # a dead node never gets there)
                     "backoffLimit": 100, "podReplacementPolicy": "TerminatingOrFailed",
                     # kwok finishes Job pods at once unless so labelled (docs/local-cluster.md)
                     "template": {"metadata": {"labels": {
                         "bench/job": name, "local-cluster.nvl72.dev/run-forever": "true"}},
                                  "spec": {"schedulingGroup": {"podGroupName": name},
                                           "restartPolicy": "Never",
                                           "tolerations": tolerations(grace),
                                           "containers": container(GPUS_PER_NODE)}}}})
        return
    api.call("POST", f"/apis/nvl72.dev/v1alpha1/namespaces/{ns}/nvl72jobs", {
        "apiVersion": "nvl72.dev/v1alpha1", "kind": "NVL72Job", "metadata": {"name": name},
        "spec": {"replicas": n, "gpusPerReplica": GPUS_PER_NODE,
                 "topology": {"mode": "Required"},
                 "recovery": {"policy": "InPlace", "notReadyGraceSeconds": grace},
                 "template": {"metadata": {"labels": {"bench/job": name}},
                              "spec": {"containers": container(GPUS_PER_NODE)}}}})


# ---- observation ----------------------------------------------------------------------------
def rack_of(node):
    return node.split("-", 1)[0]


class Cluster:
    """One snapshot: the namespace's live pods by job, and GPU use per node (all namespaces)."""

    def __init__(self, api, ns):
        self.pods = api.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        self.live = [p for p in self.pods if not p["metadata"].get("deletionTimestamp")
                     and p["status"].get("phase") not in ("Failed", "Succeeded")]
        self.by_job = {}
        for p in self.live:
            job = p["metadata"].get("labels", {}).get("bench/job")
            if job:
                self.by_job.setdefault(job, []).append(p)

    def running(self, job, size):
        pods = self.by_job.get(job, [])
        ok = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        return len(ok) == size and len(pods) == size

    def nodes_of(self, job):
        return sorted(p["spec"]["nodeName"] for p in self.by_job.get(job, [])
                      if p["spec"].get("nodeName"))


def gpu_use(api):
    use = {}
    for p in api.call("GET", "/api/v1/pods")["items"]:
        node = p["spec"].get("nodeName")
        if not node or p["status"].get("phase") in ("Failed", "Succeeded"):
            continue
        for c in p["spec"]["containers"]:
            use[node] = use.get(node, 0) + int(
                c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", "0"))
    return use


def free_blocks(api, racks):
    """Whole free racks and the largest block of wholly free nodes in one rack (nodes)."""
    use = gpu_use(api)
    nodes = api.call("GET", "/api/v1/nodes")["items"]
    free = {}
    for n in nodes:
        name = n["metadata"]["name"]
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in n["status"].get("conditions", []))
        if ready and use.get(name, 0) == 0:
            free[rack_of(name)] = free.get(rack_of(name), 0) + 1
    whole = sum(1 for r in free.values() if r == NODES_PER_RACK)
    return whole, max(free.values(), default=0)


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


# ---- one run --------------------------------------------------------------------------------
def run(a):
    api = Api()
    w = json.load(open(a.workload))
    ns = a.namespace
    t0 = now()
    submitted, started, domains = {}, {}, {}
    pending = list(w["jobs"])
    gangs = {j["name"]: j for j in w["jobs"] if j["kind"] == "gang"}
    size = {j["name"]: j.get("nodes", 1) for j in w["jobs"]}
    deadline = None
    while True:
        t = now() - t0
        while pending and pending[0]["at"] <= t:
            j = pending.pop(0)
            submit(api, a.system, ns, j, a.grace)
            submitted[j["name"]] = now()
        c = Cluster(api, ns)
        for name in submitted:
            if name not in started and c.running(name, size[name]):
                started[name] = now()
                if name in gangs:
                    domains[name] = sorted({rack_of(n) for n in c.nodes_of(name)})
        if not pending and deadline is None:
            deadline = now() + a.settle_seconds
        if not pending and (len(started) == len(submitted) or now() > deadline):
            break
        time.sleep(0.5)
    gang_times = [started[g] - submitted[g] for g in gangs if g in started]
    result = {
        "system": a.system,
        "gangs": len(gangs),
        "gangs_running": sum(1 for g in gangs if g in started),
        "gangs_one_domain": sum(1 for g in domains if len(domains[g]) == 1),
        "gang_start_p50_s": pct(gang_times, 50),
        "gang_start_p99_s": pct(gang_times, 99),
        "singles": len(w["jobs"]) - len(gangs),
        "singles_running": sum(1 for j in started if j not in gangs),
    }
    if a.node_failure:
        result.update(node_failure(api, a, ns, gangs, domains))
    result.update(burst(api, a, ns, w))
    result["free_racks_after_burst"], result["largest_free_block_nodes"] = free_blocks(api, w["racks"])
    json.dump(result, sys.stdout)
    print()


def node_failure(api, a, ns, gangs, domains):
    """Stops the kubelet of a node of the busiest rack that holds a gang rank; times the
    replacement."""
    c = Cluster(api, ns)
    per_rack = {}
    for g in gangs:
        for n in c.nodes_of(g):
            per_rack.setdefault(rack_of(n), []).append((g, n))
    if not per_rack:
        return {"failure": "no gang running"}
    rack = max(per_rack, key=lambda r: len(per_rack[r]))
    gang, node = sorted(per_rack[rack])[0]
    n = gangs[gang]["nodes"]
    before = {p["metadata"]["uid"] for p in c.by_job[gang]}
    subprocess.run([a.local_cluster, "kubelet", "stop", node, "--state", a.state], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = now()
    out = {"failed_node": node, "failed_gang": gang}
    while now() - t0 < a.replace_timeout:
        c = Cluster(api, ns)
        pods = c.by_job.get(gang, [])
        new = [p for p in pods if p["metadata"]["uid"] not in before]
        if new and c.running(gang, n) and node not in c.nodes_of(gang):
            out["replacement_s"] = round(now() - t0, 1)
            out["replacement_node"] = new[0]["spec"]["nodeName"]
            out["replacement_same_rack"] = rack_of(new[0]["spec"]["nodeName"]) == rack
            out["gang_racks_after"] = sorted({rack_of(x) for x in c.nodes_of(gang)})
            return out
        time.sleep(0.5)
    out["replacement_s"] = None
    out["replacement_pending"] = pending_reasons(c, gang, before)
    return out


def pending_reasons(c, gang, before):
    """Why the gang's new pods are not Running: their PodScheduled condition messages."""
    reasons = []
    for p in c.by_job.get(gang, []):
        if p["metadata"]["uid"] in before:
            continue
        for cond in p["status"].get("conditions", []):
            if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
                reasons.append(cond.get("message", cond.get("reason", "")))
    return reasons or ["no new pod"]


def burst(api, a, ns, w):
    sched = "default-scheduler" if a.system == "native" else "nvl72-scheduler"
    t0 = now()
    for j in w["burst"]:
        api.call("POST", f"/api/v1/namespaces/{ns}/pods", single_pod(ns, j["name"], j["gpus"], sched))
    names = {j["name"] for j in w["burst"]}
    bound_at = None
    while now() - t0 < a.burst_timeout:
        pods = api.call("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=bench%2Fjob")["items"]
        bound = sum(1 for p in pods if p["metadata"]["name"] in names and p["spec"].get("nodeName"))
        if bound == len(names):
            bound_at = now()
            break
        time.sleep(0.2)
    if bound_at is None:
        return {"burst_bound": bound, "burst_pods_per_s": None}
    return {"burst_bound": len(names), "burst_pods_per_s": round(len(names) / (bound_at - t0), 1)}


def release(a):
    """Takes the finalizers off the namespace's pods (8 at a time): a Job's pods keep
    batch.kubernetes.io/job-tracking until the Job controller has counted them terminal, which a
    kubelet reports and kwok's fast stages do not. Cleanup only."""
    api = Api()
    pods = api.call("GET", f"/api/v1/namespaces/{a.namespace}/pods")["items"]
    names = [p["metadata"]["name"] for p in pods if p["metadata"].get("finalizers")]

    def strip(name):
        try:
            api.call("PATCH", f"/api/v1/namespaces/{a.namespace}/pods/{name}",
                     {"metadata": {"finalizers": None}}, "application/merge-patch+json")
        except RuntimeError:
            pass  # gone meanwhile

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(strip, names))
    print(f"released {len(names)} pods", file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("workload")
    g.add_argument("--trace", required=True)
    g.add_argument("--racks", type=int, default=8)
    g.add_argument("--load", type=float, default=0.7)
    g.add_argument("--arrival-seconds", type=float, default=120)
    g.add_argument("--singles", type=int, default=60)
    g.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("run")
    r.add_argument("--system", choices=["native", "nvl72"], required=True)
    r.add_argument("--workload", required=True)
    r.add_argument("--namespace", required=True)
    r.add_argument("--grace", type=int, default=10)
    r.add_argument("--settle-seconds", type=float, default=120)
    r.add_argument("--replace-timeout", type=float, default=180)
    r.add_argument("--burst-timeout", type=float, default=120)
    r.add_argument("--no-node-failure", dest="node_failure", action="store_false",
                   help="skip the node failure (a large cluster runs with a long node monitor grace)")
    r.add_argument("--local-cluster", required=True)
    r.add_argument("--state", required=True)
    c = sub.add_parser("release")
    c.add_argument("--namespace", required=True)
    a = p.parse_args()
    if a.cmd == "release":
        release(a)
    elif a.cmd == "workload":
        json.dump(make_workload(a), sys.stdout)
        print()
    else:
        run(a)


if __name__ == "__main__":
    main()
