// Karpenter with its kwok cloud provider, started as sigs.k8s.io/karpenter/kwok starts it, plus the one thing EC2 does
// and kwok never does: an instance type can run out of capacity.
//
// The instance types named in the file $LAB_OUT_OF_CAPACITY_FILE (one per line; lab/capacity writes it) have none.
// A launch tries the claim's allowed types cheapest first and takes the first that has capacity, as one EC2 Fleet
// request tries its pools; only when every allowed type is out does it fail with an insufficient-capacity error, as the
// fleet request fails: Karpenter records the InsufficientCapacityError event on the NodeClaim and deletes it. Like
// Karpenter's AWS provider, a type that ran out is kept unavailable for three minutes, so the next NodeClaims are not
// offered it. The file is read at every launch: a test flips capacity while the lab runs.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// How long Karpenter's AWS provider treats an offering that ran out of capacity as unavailable.
const unavailableFor = 3 * time.Minute

type capacityLimited struct {
	cloudprovider.CloudProvider
	types map[string]*cloudprovider.InstanceType
	file  string

	mu          sync.Mutex
	unavailable map[string]time.Time
}

func newCapacityLimited(inner cloudprovider.CloudProvider, types []*cloudprovider.InstanceType, file string) *capacityLimited {
	return &capacityLimited{
		CloudProvider: inner,
		types:         lo.KeyBy(types, func(it *cloudprovider.InstanceType) string { return it.Name }),
		file:          file,
		unavailable:   map[string]time.Time{},
	}
}

func (c *capacityLimited) outOfCapacity() map[string]bool {
	out := map[string]bool{}
	if c.file == "" {
		return out
	}
	data, err := os.ReadFile(c.file)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name := strings.TrimSpace(line); name != "" && !strings.HasPrefix(name, "#") {
			out[name] = true
		}
	}
	return out
}

func (c *capacityLimited) unavailableNow() map[string]bool {
	// A lab shortcut: capacity given back with lab/capacity is usable at once, so tests need not wait out the cache.
	listed := c.outOfCapacity()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	out := map[string]bool{}
	for name, until := range c.unavailable {
		if listed[name] && now.Before(until) {
			out[name] = true
		} else {
			delete(c.unavailable, name)
		}
	}
	return out
}

// Create launches the claim as one EC2 Fleet request does: its allowed instance types are tried cheapest first
// (Fleet's lowest-price allocation for on-demand, one pool after another within the request), a type out of capacity
// is skipped and kept unavailable for three minutes (the AWS provider caches every InsufficientInstanceCapacity of a
// fleet answer, also when another pool launched), and the claim fails with an insufficient-capacity error only when
// every allowed type is out. The inner kwok provider is then given the one type taken: it labels the node with the
// cheapest type of the claim's requirement (kwok/cloudprovider toNode), and the AWS provider labels it with the type
// the fleet actually launched, so the node's node.kubernetes.io/instance-type is the type taken.
func (c *capacityLimited) Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error) {
	unavailable := c.unavailableNow()
	out := c.outOfCapacity()
	requirements := scheduling.NewNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	typeReq, found, ok := lo.FindIndexOf(nodeClaim.Spec.Requirements, func(req v1.NodeSelectorRequirementWithMinValues) bool {
		return req.Key == corev1.LabelInstanceTypeStable
	})
	if !ok {
		return c.CloudProvider.Create(ctx, nodeClaim)
	}
	type pool struct {
		name  string
		price float64
		zone  string
	}
	var pools []pool
	// kwok's provider does not know which offerings ran out: it is never offered them.
	for _, name := range typeReq.Values {
		it, ok := c.types[name]
		if !ok || unavailable[name] {
			continue
		}
		offerings := it.Offerings.Available().Compatible(requirements)
		if len(offerings) == 0 {
			continue
		}
		cheapest := lo.MinBy(offerings, func(a, b *cloudprovider.Offering) bool { return a.Price < b.Price })
		pools = append(pools, pool{name, cheapest.Price, cheapest.Requirements.Get(corev1.LabelTopologyZone).Any()})
	}
	sort.SliceStable(pools, func(i, j int) bool { return pools[i].price < pools[j].price })
	var refused []string
	for _, p := range pools {
		if out[p.name] {
			c.mu.Lock()
			c.unavailable[p.name] = time.Now().Add(unavailableFor)
			c.mu.Unlock()
			refused = append(refused, fmt.Sprintf(
				"InsufficientInstanceCapacity: We currently do not have sufficient %s capacity in the Availability Zone you requested (%s)",
				p.name, p.zone))
			continue
		}
		if len(refused) > 0 {
			log.FromContext(ctx).Info("launch fell through to the next instance type", "nodeclaim", nodeClaim.Name,
				"instance-type", p.name, "fleet-errors", strings.Join(refused, "; "))
		}
		claim := nodeClaim.DeepCopy()
		claim.Spec.Requirements[found].Values = []string{p.name}
		return c.CloudProvider.Create(ctx, claim)
	}
	if len(refused) == 0 {
		// Every allowed type is in the unavailable cache already (a claim of the same batch ran into it): the AWS
		// provider says so before asking EC2.
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("all requested instance types were unavailable during launch"))
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("creating instance, with fleet error(s), %s",
		strings.Join(refused, "; ")))
}

func (c *capacityLimited) GetInstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	types, err := c.CloudProvider.GetInstanceTypes(ctx, pool)
	if err != nil {
		return nil, err
	}
	unavailable := c.unavailableNow()
	return lo.Map(types, func(it *cloudprovider.InstanceType, _ int) *cloudprovider.InstanceType {
		if !unavailable[it.Name] {
			return it
		}
		copied := it.DeepCopy()
		for _, offering := range copied.Offerings {
			offering.Available = false
		}
		return copied
	}), nil
}

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed constructing instance types")
	}

	undecorated := newCapacityLimited(kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes), instanceTypes, os.Getenv("LAB_OUT_OF_CAPACITY_FILE"))
	cloudProvider := overlay.Decorate(undecorated, op.GetClient(), op.InstanceTypeStore)
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider)
	op.
		WithControllers(ctx, controllers.NewControllers(
			ctx,
			op.Manager,
			op.Clock,
			op.GetClient(),
			op.EventRecorder,
			cloudProvider,
			undecorated,
			clusterState,
			op.InstanceTypeStore,
		)...).Start(ctx)
}
