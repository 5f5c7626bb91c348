package results

import "slices"

// TenantMetrics is one tenant's share of a run: what a fairness question asks of it.
type TenantMetrics struct {
	// Requests and Completed count the tenant's requests, and those that completed.
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	// Service is the tenant's service in the units of Metrics.JainFairness: prompt tokens
	// plus twice the output tokens of its completed requests.
	Service float64 `json:"service"`
	// TTFT is the distribution of the tenant's times to first token (ms).
	TTFT Dist `json:"ttft_ms"`
}

// tenantAgg folds one tenant's records.
type tenantAgg struct {
	requests, completed int
	service             float64
	ttft                Histogram
}

func (t *tenantAgg) add(r *Record) {
	t.requests++
	if r.Status != StatusCompleted {
		return
	}
	t.completed++
	t.service += float64(r.PromptTokens) + 2*float64(r.OutputTokens)
	if d, ok := r.TTFT(); ok {
		t.ttft.Add(d, 1)
	}
}

// tenant returns the tenant's aggregate, creating it.
func (a *Aggregator) tenant(name string) *tenantAgg {
	t := a.tenants[name]
	if t == nil {
		t = &tenantAgg{}
		a.tenants[name] = t
	}
	return t
}

// tenantMetrics returns each tenant's metrics, or nil with fewer than two tenants.
func (a *Aggregator) tenantMetrics() map[string]TenantMetrics {
	if len(a.tenants) < 2 {
		return nil
	}
	out := make(map[string]TenantMetrics, len(a.tenants))
	for name, t := range a.tenants {
		out[name] = TenantMetrics{Requests: t.requests, Completed: t.completed, Service: t.service, TTFT: dist(&t.ttft)}
	}
	return out
}

// HeaviestTenant returns the tenant that sent the most requests (ties by name), and false with fewer
// than two tenants: in a fairness scenario, the one whose load the others must be shielded from.
func (m *Metrics) HeaviestTenant() (string, bool) {
	if len(m.Tenants) < 2 {
		return "", false
	}
	names := make([]string, 0, len(m.Tenants))
	for n := range m.Tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	top := names[0]
	for _, n := range names[1:] {
		if m.Tenants[n].Requests > m.Tenants[top].Requests {
			top = n
		}
	}
	return top, true
}
