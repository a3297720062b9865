//go:build linux

package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requestIDMeta is the _meta key the connection stamps on every tools/call
// with the JSON-RPC id of the request (the SDK does not hand a tool handler
// its request id). A value the client put there itself is overwritten.
const requestIDMeta = "dev.confine/request_id"

// idTransport wraps a transport so that each session has an id (stdio has
// none: a random one is made) and each tools/call carries its request id.
type idTransport struct{ mcp.Transport }

func (t idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id := c.SessionID()
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "mcp-" + hex.EncodeToString(b[:])
	}
	return &idConn{Connection: c, id: id}, nil
}

type idConn struct {
	mcp.Connection
	id string
}

func (c *idConn) SessionID() string { return c.id }

func (c *idConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil {
		return m, err
	}
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "tools/call" && r.ID.IsValid() {
		if p, err := stampRequestID(r.Params, fmt.Sprint(r.ID.Raw())); err == nil {
			r.Params = p
		}
		// Params that are not an object are left to the SDK to refuse.
	}
	return m, nil
}

// stampRequestID sets _meta[requestIDMeta] = id in the params object.
func stampRequestID(params json.RawMessage, id string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("params: not an object")
		}
	}
	meta := map[string]any{}
	if raw, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			meta = map[string]any{}
		}
	}
	meta[requestIDMeta] = id
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = b
	return json.Marshal(obj)
}

// requestID is the id stamped by idConn ("" when the call came another way).
func requestID(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	s, _ := req.Params.Meta[requestIDMeta].(string)
	return s
}
