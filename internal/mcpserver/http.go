//go:build linux

package mcpserver

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxBody bounds one HTTP request's body (a write_file's content or a
// patch with its JSON quoting).
const maxBody = 96 << 20

// HTTPHandler serves the streamable HTTP transport to clients that send
// "Authorization: Bearer TOKEN"; any other request gets 401 before the
// SDK sees it. Each tools/call gets its request id stamped, as on stdio.
func (s *Server) HTTPHandler(token string) (http.Handler, error) {
	if len(token) < 16 {
		return nil, fmt.Errorf("%w: an HTTP token needs at least 16 characters", ErrRefused)
	}
	idle := s.idle
	if idle <= 0 {
		idle = idleSession
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxBody, SessionTimeout: idle})
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="confine mcp"`)
			http.Error(w, "confine mcp: a bearer token is required", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil || len(body) > maxBody {
				http.Error(w, "confine mcp: request body unreadable or too large", http.StatusRequestEntityTooLarge)
				return
			}
			body = stampBody(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		h.ServeHTTP(w, r)
	}), nil
}

// stampBody stamps the request id on the tools/call requests of an HTTP
// body (one message, or a batch); a body it cannot parse is left to the
// SDK to refuse.
func stampBody(body []byte) []byte {
	stamp := func(raw json.RawMessage) json.RawMessage {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return raw
		}
		r, ok := m.(*jsonrpc.Request)
		if !ok || r.Method != "tools/call" || !r.ID.IsValid() {
			return raw
		}
		p, err := stampRequestID(r.Params, fmt.Sprint(r.ID.Raw()))
		if err != nil {
			return raw
		}
		r.Params = p
		out, err := jsonrpc.EncodeMessage(r)
		if err != nil {
			return raw
		}
		return out
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return body
		}
		for i := range batch {
			batch[i] = stamp(batch[i])
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return body
		}
		return out
	}
	return stamp(trimmed)
}
