package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
)

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion       = 5
	socksNoAuth        = 0
	socksNoMethod      = 0xff
	socksCmdConnect    = 1
	socksAtypIPv4      = 1
	socksAtypDomain    = 3
	socksAtypIPv6      = 4
	socksOK            = 0
	socksNotAllowed    = 2
	socksCmdNotSupport = 7
	socksAtypNotSup    = 8
)

// socks serves one SOCKS5 CONNECT (no authentication; names resolved
// here, after the check), then the same TLS tunnel as CONNECT.
func (s *session) socks(ctx context.Context) {
	var hdr [2]byte
	if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
		s.deny("short SOCKS greeting")
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(s.br, methods); err != nil {
		s.deny("short SOCKS greeting")
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == socksNoAuth
	}
	if !noAuth {
		s.client.Write([]byte{socksVersion, socksNoMethod})
		s.deny("SOCKS client offers no method without authentication")
		return
	}
	if _, err := s.client.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		s.deny("client went away")
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(s.br, req[:]); err != nil || req[0] != socksVersion {
		s.deny("bad SOCKS request")
		return
	}
	var host string
	switch req[3] {
	case socksAtypIPv4, socksAtypIPv6:
		n := 4
		if req[3] == socksAtypIPv6 {
			n = 16
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(s.br, b); err != nil {
			s.deny("short SOCKS address")
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.Unmap().String()
	case socksAtypDomain:
		var l [1]byte
		if _, err := io.ReadFull(s.br, l[:]); err != nil {
			s.deny("short SOCKS address")
			return
		}
		b := make([]byte, l[0])
		if _, err := io.ReadFull(s.br, b); err != nil {
			s.deny("short SOCKS address")
			return
		}
		host = string(b)
	default:
		s.socksReply(socksAtypNotSup)
		s.deny(fmt.Sprintf("SOCKS address type %d", req[3]))
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(s.br, pb[:]); err != nil {
		s.deny("short SOCKS port")
		return
	}
	port := int(binary.BigEndian.Uint16(pb[:]))
	s.rec.Domain, s.rec.Port = host, port
	if req[1] != socksCmdConnect {
		s.socksReply(socksCmdNotSupport)
		s.deny(fmt.Sprintf("SOCKS command %d (only CONNECT; no BIND, no UDP ASSOCIATE)", req[1]))
		return
	}
	if err := s.check(ctx, host, port); err != nil {
		s.socksReply(socksNotAllowed)
		s.deny(trimDenied(err))
		return
	}
	if _, ok := s.credential(); ok {
		s.socksReply(socksNotAllowed)
		s.refuseTunnelToCredentialHost()
		return
	}
	if err := s.socksReply(socksOK); err != nil {
		s.deny("client went away")
		return
	}
	s.tunnel(ctx)
}

// socksReply answers with code and an unspecified bound address.
func (s *session) socksReply(code byte) error {
	_, err := s.client.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
