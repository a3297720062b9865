package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"time"
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

// socks4Version starts a SOCKS4 or SOCKS4a request.
const socks4Version = 4

// socks4Wait bounds the wait for the rest of a SOCKS4 request: a client
// sends it whole, so it is there at once.
const socks4Wait = 2 * time.Second

// socks4 refuses a SOCKS4 or SOCKS4a request at once (rejection code 91),
// recording the destination it named.
func (s *session) socks4() {
	s.rec.Protocol = ProtoSOCKS4
	s.client.SetReadDeadline(time.Now().Add(min(s.p.cfg.HandshakeTimeout, socks4Wait)))
	defer s.client.Write([]byte{0, 91, 0, 0, 0, 0, 0, 0})
	var hdr [8]byte
	if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
		s.unparsable("short SOCKS4 request", err)
		return
	}
	s.rec.Port = int(binary.BigEndian.Uint16(hdr[2:4]))
	ip := netip.AddrFrom4([4]byte(hdr[4:8]))
	s.rec.Domain = ip.String()
	if _, err := s.br.ReadSlice(0); err != nil {
		s.unparsable("SOCKS4 user id without its end", err)
		return
	}
	if hdr[4] == 0 && hdr[5] == 0 && hdr[6] == 0 && hdr[7] != 0 {
		// SOCKS4a: 0.0.0.x stands for the name that follows.
		s.rec.Protocol = ProtoSOCKS4a
		name, err := s.br.ReadSlice(0)
		if err != nil {
			s.unparsable("SOCKS4a host name without its end", err)
			return
		}
		s.rec.Domain = string(name[:len(name)-1])
		if h, err := normalize(s.rec.Domain); err == nil {
			s.rec.Domain = h
		}
	}
	s.deny(s.rec.Protocol + " is not served (use SOCKS5 with remote names, socks5h://, or an HTTP proxy)")
}

// socksReply answers with code and an unspecified bound address.
func (s *session) socksReply(code byte) error {
	_, err := s.client.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
