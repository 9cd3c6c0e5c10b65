// Karpenter with its kwok cloud provider, started as sigs.k8s.io/karpenter/kwok starts it, plus the one thing EC2 does
// and kwok never does: an instance type can run out of capacity.
//
// The instance types named in the file $LAB_OUT_OF_CAPACITY_FILE (one per line; lab/capacity writes it) have none.
// A launch whose cheapest compatible offering is such a type fails with an insufficient-capacity error, as an EC2
// fleet request fails when its pool is empty: Karpenter records the InsufficientCapacityError event on the NodeClaim
// and deletes it. Like Karpenter's AWS provider, the type is then kept unavailable for three minutes, so the next
// NodeClaim falls through to another type. The file is read at every launch: a test flips capacity while the lab runs.
package main

import (
	"context"
	"fmt"
	"os"
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

func (c *capacityLimited) Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error) {
	unavailable := c.unavailableNow()
	requirements := scheduling.NewNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	claim := nodeClaim.DeepCopy()
	var chosen *cloudprovider.InstanceType
	var price float64
	var zone string
	for i, req := range claim.Spec.Requirements {
		if req.Key != corev1.LabelInstanceTypeStable {
			continue
		}
		// kwok's provider does not know which offerings ran out: it must not be offered them.
		kept := lo.Reject(req.Values, func(name string, _ int) bool { return unavailable[name] })
		claim.Spec.Requirements[i].Values = kept
		for _, name := range kept {
			it, ok := c.types[name]
			if !ok {
				continue
			}
			for _, offering := range it.Offerings.Available().Compatible(requirements) {
				if chosen == nil || offering.Price < price {
					chosen, price = it, offering.Price
					zone = offering.Requirements.Get(corev1.LabelTopologyZone).Any()
				}
			}
		}
	}
	if chosen == nil {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("creating instance, no instance type of the request has capacity"))
	}
	if c.outOfCapacity()[chosen.Name] {
		c.mu.Lock()
		c.unavailable[chosen.Name] = time.Now().Add(unavailableFor)
		c.mu.Unlock()
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf(
			"creating instance, with fleet error(s), InsufficientInstanceCapacity: We currently do not have sufficient %s capacity in the Availability Zone you requested (%s)",
			chosen.Name, zone))
	}
	return c.CloudProvider.Create(ctx, claim)
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
