// nvl72-dra-standin is a test-only stand-in for the ComputeDomain part of NVIDIA's DRA driver, for
// the local control plane of scripts/local-cluster (kwok nodes: no kubelet, no kubelet plugin).
// Written from the published API; none of NVIDIA's code. Each --interval it lists everything and
// reconciles:
//   - DeviceClasses compute-domain-default-channel.nvidia.com and compute-domain-daemon.nvidia.com;
//   - one ResourceSlice per node labelled nvidia.com/gpu.present=true (devices channel-0, daemon-0);
//   - per ComputeDomain: finalizer, the ResourceClaimTemplate of spec.channel, status.nodes/status;
//   - node label resource.nvidia.com/computeDomain=<CD uid> while a claim of that domain is allocated
//     on the node (the real driver sets it when the claim is prepared there).
//
// Every action is one line on stderr. Without the ComputeDomain CRD it keeps publishing the
// DeviceClasses and slices.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const (
	driver       = "compute-domain.nvidia.com"
	domainLabel  = "resource.nvidia.com/computeDomain" // node and template label, and the CD finalizer
	targetLabel  = "resource.nvidia.com/computeDomainTarget"
	channelClass = "compute-domain-default-channel.nvidia.com"
	daemonClass  = "compute-domain-daemon.nvidia.com"
	gpuLabel     = "nvidia.com/gpu.present"
	cliqueLabel  = "nvidia.com/gpu.clique"
)

var cdResource = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// list from the watch cache: cheap, and a loop tolerates slightly stale data.
var cached = metav1.ListOptions{ResourceVersion: "0"}

type standin struct {
	core     corev1client.CoreV1Interface // typed clients of just the two groups used
	res      resourcev1client.ResourceV1Interface
	dyn      dynamic.Interface
	lastErrs map[string]bool // errors of the previous pass: each is logged once while it lasts
	errs     map[string]bool
	conflict map[string]bool // node/uid conflicts already logged
	crd      *bool           // ComputeDomain CRD served, as last seen
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	interval := flag.Duration("interval", 250*time.Millisecond, "time between two reconcile passes")
	flag.Parse()
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds)
	log.SetOutput(os.Stderr)

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "nvl72-dra-standin"
	s := &standin{core: corev1client.NewForConfigOrDie(cfg), res: resourcev1client.NewForConfigOrDie(cfg),
		dyn: dynamic.NewForConfigOrDie(cfg), lastErrs: map[string]bool{}, conflict: map[string]bool{}}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Printf("started: driver %s, api %s, every %v", driver, cfg.Host, *interval)
	for {
		s.errs = map[string]bool{}
		s.pass(ctx)
		s.lastErrs = s.errs
		select {
		case <-ctx.Done():
			log.Printf("stopping (%v)", context.Cause(ctx))
			return
		case <-time.After(*interval):
		}
	}
}

// fail logs an error unless the previous pass had the same one; conflicts are retried silently.
func (s *standin) fail(what string, err error) {
	if err == nil || apierrors.IsConflict(err) || errors.Is(err, context.Canceled) {
		return
	}
	msg := fmt.Sprintf("ERROR %s: %v", what, err)
	if !s.lastErrs[msg] && !s.errs[msg] {
		log.Print(msg)
	}
	s.errs[msg] = true
}

func (s *standin) pass(ctx context.Context) {
	s.deviceClasses(ctx)
	nodes, err := s.core.Nodes().List(ctx, cached)
	if err != nil {
		s.fail("list nodes", err)
		return
	}
	s.resourceSlices(ctx, nodes.Items)

	cds, err := s.dyn.Resource(cdResource).Namespace("").List(ctx, cached)
	served := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		s.fail("list computedomains", err)
		return
	}
	if s.crd == nil || *s.crd != served {
		log.Printf("ComputeDomain CRD served: %v", served)
		s.crd = &served
	}
	if !served {
		return
	}
	live := map[string]*unstructured.Unstructured{} // uid -> CD not being deleted
	for i := range cds.Items {
		cd := &cds.Items[i]
		if cd.GetDeletionTimestamp() == nil {
			live[string(cd.GetUID())] = cd
			s.ensureDomain(ctx, cd)
		}
	}
	claims, err := s.res.ResourceClaims("").List(ctx, cached)
	if err != nil {
		s.fail("list resourceclaims", err)
		return
	}
	s.nodeLabels(ctx, nodes.Items, wantedDomains(claims.Items, live))
	for i := range cds.Items {
		cd := &cds.Items[i]
		if cd.GetDeletionTimestamp() != nil {
			s.finishDomain(ctx, cd, nodes.Items)
		} else {
			s.domainStatus(ctx, cd, nodes.Items)
		}
	}
}

// ---- DeviceClasses and ResourceSlices

func (s *standin) deviceClasses(ctx context.Context) {
	have, err := s.res.DeviceClasses().List(ctx, cached)
	if err != nil {
		s.fail("list deviceclasses", err)
		return
	}
	for name, typ := range map[string]string{channelClass: "channel", daemonClass: "daemon"} {
		if slices.ContainsFunc(have.Items, func(c resourcev1.DeviceClass) bool { return c.Name == name }) {
			continue
		}
		expr := fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == '%s' && device.attributes['%s'].id == 0",
			driver, driver, typ, driver)
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
		_, err := s.res.DeviceClasses().Create(ctx, dc, metav1.CreateOptions{})
		if err == nil {
			log.Printf("created DeviceClass %s", name)
		} else if !apierrors.IsAlreadyExists(err) {
			s.fail("create DeviceClass "+name, err)
		}
	}
}

func device(name, typ string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type": {StringValue: ptr.To(typ)}, "id": {IntValue: ptr.To[int64](0)}}}
}

func isGPUNode(n *corev1.Node) bool {
	return n.Labels[gpuLabel] == "true" && n.DeletionTimestamp == nil
}

func (s *standin) resourceSlices(ctx context.Context, nodes []corev1.Node) {
	api := s.res.ResourceSlices()
	have, err := api.List(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: resourcev1.ResourceSliceSelectorDriver + "=" + driver})
	if err != nil {
		s.fail("list resourceslices", err)
		return
	}
	sliceOf := map[string]bool{}
	gpu := map[string]bool{}
	for i := range nodes {
		if isGPUNode(&nodes[i]) {
			gpu[nodes[i].Name] = true
		}
	}
	for _, sl := range have.Items {
		node := ptr.Deref(sl.Spec.NodeName, "")
		if gpu[node] {
			sliceOf[node] = true
			continue
		}
		if err := api.Delete(ctx, sl.Name, metav1.DeleteOptions{}); err == nil {
			log.Printf("deleted ResourceSlice %s (node %q has no GPUs or is gone)", sl.Name, node)
		} else if !apierrors.IsNotFound(err) {
			s.fail("delete ResourceSlice "+sl.Name, err)
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if !gpu[n.Name] || sliceOf[n.Name] {
			continue
		}
		sl := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + driver, OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(n.Name),
				Pool:    resourcev1.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{device("channel-0", "channel"), device("daemon-0", "daemon")}},
		}
		if _, err := api.Create(ctx, sl, metav1.CreateOptions{}); err == nil {
			log.Printf("created ResourceSlice %s (node %s: channel-0, daemon-0)", sl.Name, n.Name)
		} else if !apierrors.IsAlreadyExists(err) {
			s.fail("create ResourceSlice "+sl.Name, err)
		}
	}
}

// ---- ComputeDomains

func cdName(cd *unstructured.Unstructured) string {
	return fmt.Sprintf("ComputeDomain %s/%s (uid %s)", cd.GetNamespace(), cd.GetName(), cd.GetUID())
}

func templateName(cd *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "resourceClaimTemplate", "name")
	return name
}

// ensureDomain: the finalizer, then the channel's ResourceClaimTemplate.
func (s *standin) ensureDomain(ctx context.Context, cd *unstructured.Unstructured) {
	if !slices.Contains(cd.GetFinalizers(), domainLabel) {
		cd = cd.DeepCopy()
		cd.SetFinalizers(append(cd.GetFinalizers(), domainLabel))
		if _, err := s.dyn.Resource(cdResource).Namespace(cd.GetNamespace()).Update(ctx, cd, metav1.UpdateOptions{}); err != nil {
			s.fail("add finalizer to "+cdName(cd), err)
			return
		}
		log.Printf("added finalizer %s to %s", domainLabel, cdName(cd))
	}
	name, uid := templateName(cd), string(cd.GetUID())
	api := s.res.ResourceClaimTemplates(cd.GetNamespace())
	if t, err := api.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"}); err == nil {
		if t.Labels[domainLabel] != uid && !s.conflict["template/"+uid] {
			log.Printf("WARNING %s: ResourceClaimTemplate %s/%s exists and belongs to %q: left alone", cdName(cd), t.Namespace, name, t.Labels[domainLabel])
			s.conflict["template/"+uid] = true
		}
		return
	} else if !apierrors.IsNotFound(err) {
		s.fail("get ResourceClaimTemplate for "+cdName(cd), err)
		return
	}
	mode, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "allocationMode")
	if mode == "" {
		mode = "Single"
	}
	params, _ := json.Marshal(map[string]string{"apiVersion": "resource.nvidia.com/v1beta1",
		"kind": "ComputeDomainChannelConfig", "domainID": uid, "allocationMode": mode})
	t := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cd.GetNamespace(),
			Labels: map[string]string{domainLabel: uid, targetLabel: "Workload"}},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "channel", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: channelClass}}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"channel"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver: driver, Parameters: runtime.RawExtension{Raw: params}}}}},
		}}},
	}
	if _, err := api.Create(ctx, t, metav1.CreateOptions{}); err == nil {
		log.Printf("created ResourceClaimTemplate %s/%s for %s (allocationMode %s)", t.Namespace, name, cdName(cd), mode)
	} else if !apierrors.IsAlreadyExists(err) {
		s.fail("create ResourceClaimTemplate for "+cdName(cd), err)
	}
}

// finishDomain: a deleted CD loses its template and node labels, then its finalizer.
func (s *standin) finishDomain(ctx context.Context, cd *unstructured.Unstructured, nodes []corev1.Node) {
	if !slices.Contains(cd.GetFinalizers(), domainLabel) {
		return
	}
	uid, name := string(cd.GetUID()), templateName(cd)
	api := s.res.ResourceClaimTemplates(cd.GetNamespace())
	if t, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil && t.Labels[domainLabel] == uid {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.fail("delete ResourceClaimTemplate of "+cdName(cd), err)
			return
		}
		log.Printf("deleted ResourceClaimTemplate %s/%s of deleted %s", cd.GetNamespace(), name, cdName(cd))
	} else if err != nil && !apierrors.IsNotFound(err) {
		s.fail("get ResourceClaimTemplate of "+cdName(cd), err)
		return
	}
	for i := range nodes { // nodeLabels already removed them unless the cache was stale
		if nodes[i].Labels[domainLabel] == uid && !s.setLabel(ctx, &nodes[i], "", "its ComputeDomain is deleted") {
			return
		}
	}
	cd = cd.DeepCopy()
	cd.SetFinalizers(slices.DeleteFunc(cd.GetFinalizers(), func(f string) bool { return f == domainLabel }))
	if _, err := s.dyn.Resource(cdResource).Namespace(cd.GetNamespace()).Update(ctx, cd, metav1.UpdateOptions{}); err != nil {
		s.fail("remove finalizer of "+cdName(cd), err)
		return
	}
	log.Printf("removed finalizer of deleted %s", cdName(cd))
}

// wantedDomains: node -> uids of the live CDs with a claim allocated on the node (results of our
// driver; the pool is the node's name). Claims being deleted no longer count.
func wantedDomains(claims []resourcev1.ResourceClaim, live map[string]*unstructured.Unstructured) map[string][]string {
	want := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil || c.DeletionTimestamp != nil {
			continue
		}
		uid := ""
		for _, cfg := range c.Spec.Devices.Config {
			if cfg.Opaque != nil && cfg.Opaque.Driver == driver {
				var p struct {
					DomainID string `json:"domainID"`
				}
				if json.Unmarshal(cfg.Opaque.Parameters.Raw, &p) == nil && p.DomainID != "" {
					uid = p.DomainID
				}
			}
		}
		if live[uid] == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == driver && !slices.Contains(want[r.Pool], uid) {
				want[r.Pool] = append(want[r.Pool], uid)
			}
		}
	}
	for _, uids := range want {
		sort.Strings(uids)
	}
	return want
}

// nodeLabels: a node keeps its label while a claim of that domain is allocated on it; an unlabelled
// node gets the domain of its claims. A second domain on a labelled node is a conflict (the real
// driver fails to prepare the claim): logged once, label left alone.
func (s *standin) nodeLabels(ctx context.Context, nodes []corev1.Node, want map[string][]string) {
	for i := range nodes {
		n := &nodes[i]
		cur, uids := n.Labels[domainLabel], want[n.Name]
		next := cur
		if !slices.Contains(uids, cur) {
			next = ""
			if len(uids) > 0 {
				next = uids[0]
			}
		}
		for _, u := range uids {
			if u != next && !s.conflict[n.Name+"/"+u] {
				log.Printf("WARNING node %s: a claim of ComputeDomain uid %s is allocated here but the node belongs to %s: label left alone (the real driver would fail to prepare the claim)", n.Name, u, next)
				s.conflict[n.Name+"/"+u] = true
			}
		}
		if next != cur {
			why := "a claim of the domain is allocated on it"
			if next == "" {
				why = "no claim of domain " + cur + " is allocated on it any more"
			}
			s.setLabel(ctx, n, next, why)
		}
	}
}

// setLabel sets (or, with "", removes) the node's domain label, also in the given copy.
func (s *standin) setLabel(ctx context.Context, n *corev1.Node, uid, why string) bool {
	val := any(nil)
	if uid != "" {
		val = uid
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{domainLabel: val}}})
	if _, err := s.core.Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.fail("label node "+n.Name, err)
		return false
	}
	if uid == "" {
		log.Printf("node %s: removed label %s=%s (%s)", n.Name, domainLabel, n.Labels[domainLabel], why)
		delete(n.Labels, domainLabel)
	} else {
		log.Printf("node %s: labelled %s=%s (%s)", n.Name, domainLabel, uid, why)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[domainLabel] = uid
	}
	return true
}

// domainStatus: status.nodes = the nodes labelled for the domain (a node keeps its index),
// status.status Ready once at least one node, and numNodes if set, are in.
func (s *standin) domainStatus(ctx context.Context, cd *unstructured.Unstructured, nodes []corev1.Node) {
	uid := string(cd.GetUID())
	old, _, _ := unstructured.NestedSlice(cd.Object, "status", "nodes")
	index, used := map[string]int64{}, map[int64]bool{}
	for _, o := range old {
		m, _ := o.(map[string]any)
		name, _ := m["name"].(string)
		if i, ok := m["index"].(int64); ok {
			index[name], used[i] = i, true
		}
	}
	var members []any
	for i := range nodes {
		n := &nodes[i]
		if n.Labels[domainLabel] != uid {
			continue
		}
		ip := "127.0.0.1"
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
				break
			}
		}
		idx, ok := index[n.Name]
		if !ok {
			for idx = 0; used[idx]; idx++ {
			}
			used[idx] = true
		}
		members = append(members, map[string]any{"name": n.Name, "ipAddress": ip,
			"cliqueID": n.Labels[cliqueLabel], "index": idx, "status": "Ready"})
	}
	numNodes, _, _ := unstructured.NestedInt64(cd.Object, "spec", "numNodes")
	status := map[string]any{"status": "NotReady"}
	if len(members) > 0 && (numNodes == 0 || int64(len(members)) >= numNodes) {
		status["status"] = "Ready"
	}
	if len(members) > 0 {
		status["nodes"] = members
	}
	oldStatus, _, _ := unstructured.NestedMap(cd.Object, "status")
	a, _ := json.Marshal(oldStatus)
	b, _ := json.Marshal(status)
	if string(a) == string(b) {
		return
	}
	cd = cd.DeepCopy()
	cd.Object["status"] = status
	if _, err := s.dyn.Resource(cdResource).Namespace(cd.GetNamespace()).UpdateStatus(ctx, cd, metav1.UpdateOptions{}); err != nil {
		s.fail("update status of "+cdName(cd), err)
		return
	}
	log.Printf("%s: status %s, %d node(s) %s", cdName(cd), status["status"], len(members), b)
}
