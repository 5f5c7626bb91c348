package openai

import (
	"encoding/json"
	"net/http"
)

// Error types, as the OpenAI API names them in the "type" field of an error body.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
)

// Error is the object of an OpenAI error body, {"error": {"message", "type", "param", "code"}}.
// Empty Param and Code are written as null.
type Error struct {
	// Status is the HTTP status the error is sent with; it is not part of the body.
	Status int
	// Message is a human-readable description.
	Message string
	// Type is TypeInvalidRequest for client errors and TypeServer for the others.
	Type string
	// Param names the request field at fault, if any.
	Param string
	// Code is a short machine-readable reason ("model_not_found", "invalid_api_key"), if any.
	Code string
}

// Error returns the message.
func (e *Error) Error() string { return "openai: " + e.Message }

type wireError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AppendJSON appends the error body {"error": {...}} to dst.
func (e *Error) AppendJSON(dst []byte) []byte {
	b, err := json.Marshal(struct {
		Error wireError `json:"error"`
	}{wireError{Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code)}})
	if err != nil { // strings always marshal
		panic(err)
	}
	return append(dst, b...)
}

// AppendEvent appends the error as one server-sent event, "data: {"error": {...}}" and a
// blank line, the way vLLM and OpenAI end a stream that failed after it started.
func (e *Error) AppendEvent(dst []byte) []byte {
	dst = append(dst, "data: "...)
	dst = e.AppendJSON(dst)
	return append(dst, "\n\n"...)
}

// WriteError writes e as a JSON error response with status e.Status (500 when unset).
func WriteError(w http.ResponseWriter, e *Error) {
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	b := e.AppendJSON(make([]byte, 0, 160))
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client is gone if this fails; nothing else to tell it
}
