package gateway

import (
	"net/http"
	"slices"
	"strings"

	"kvroute/internal/openai"
)

// modelIndex answers "does any backend serve this model?" without a lock.
type modelIndex struct {
	any bool // some backend's model list is unknown: it may serve anything
	ids map[string]struct{}
}

// rebuildModels recomputes the model index from st's backends. Gateway.mu must be held.
func (g *Gateway) rebuildModels(st *state) {
	mi := &modelIndex{ids: map[string]struct{}{}}
	for _, b := range st.backends {
		if b.models == nil {
			mi.any = true
		}
		for _, id := range b.models {
			mi.ids[id] = struct{}{}
		}
	}
	g.models.Store(mi)
}

// knowsModel reports whether some backend, ready or not, may serve model.
func (g *Gateway) knowsModel(model string) bool {
	mi := g.models.Load()
	if model == "" || mi.any {
		return true
	}
	_, ok := mi.ids[model]
	return ok
}

// serveModels answers GET /v1/models with the union of the backends' model lists, by id.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, http.MethodGet)
		return
	}
	st := g.current.Load()
	if !st.authorized(r) {
		openai.WriteError(w, errUnauthorized)
		return
	}
	list := openai.ModelList{Object: "list", Data: []openai.Model{}}
	seen := map[string]bool{}
	g.mu.Lock()
	for _, b := range st.backends {
		for _, m := range b.modelList {
			if !seen[m.ID] {
				seen[m.ID] = true
				list.Data = append(list.Data, m)
			}
		}
	}
	g.mu.Unlock()
	slices.SortFunc(list.Data, func(a, b openai.Model) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, list)
}
