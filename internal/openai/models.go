package openai

import (
	"encoding/json"
	"fmt"
)

// Model is one entry of a /v1/models list.
type Model struct {
	// ID is the model (or LoRA adapter) name clients put in "model".
	ID string `json:"id"`
	// Object is "model".
	Object string `json:"object"`
	// Created is the creation time in Unix seconds.
	Created int64 `json:"created"`
	// OwnedBy names the owner ("vllm" for vLLM).
	OwnedBy string `json:"owned_by"`
	// Root is the base model of an adapter (vLLM); Parent likewise, when set.
	Root   string `json:"root,omitempty"`
	Parent string `json:"parent,omitempty"`
	// MaxModelLen is the context length in tokens (vLLM), 0 when not reported.
	MaxModelLen int `json:"max_model_len,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	// Object is "list".
	Object string `json:"object"`
	// Data lists the models.
	Data []Model `json:"data"`
}

// ParseModels parses a /v1/models body into its models.
func ParseModels(b []byte) ([]Model, error) {
	var l ModelList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("openai: models: %w", err)
	}
	for i, m := range l.Data {
		if m.ID == "" {
			return nil, fmt.Errorf("openai: models: entry %d has no id", i)
		}
	}
	return l.Data, nil
}
