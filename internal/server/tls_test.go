package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// TestTLSClusterAndClient: the API is served over HTTPS, a second server
// joins over HTTPS with raft over TLS, and a client verifying with the CA
// is forwarded from the follower to the leader.
func TestTLSClusterAndClient(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := tlstest.Generate(t, dir, "127.0.0.1", "localhost")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := server.Config{TLSCert: cert, TLSKey: key, TLSCA: ca, Logger: quietLogger(), RaftTimeout: time.Second, Listen: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}
	c1 := base
	c1.DataDir, c1.NodeID = dir+"/n1", "n1"
	s1, err := server.Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	c2 := base
	c2.DataDir, c2.NodeID, c2.Join, c2.JoinToken = dir+"/n2", "n2", s1.URL(), s1.AdminToken()
	s2, err := server.Start(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()

	tc, err := tlsutil.ClientConfig(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(s2.URL(), s1.AdminToken(), tc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cl.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Members) != 2 || v.PeerAuth != "mtls" {
		t.Fatalf("members = %+v, peer auth %q; want 2, mtls", v.Members, v.PeerAuth)
	}
	seed(t, cl)
	// A client without the CA refuses the server.
	plain, _ := client.New(s1.URL(), s1.AdminToken(), nil)
	plain.RetryFor = 0
	if _, err := plain.WhoAmI(ctx); err == nil {
		t.Fatal("a client without the CA accepted the server's certificate")
	}
}
