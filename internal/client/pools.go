package client

import (
	"context"
	"net/url"

	"github.com/jobfabric/jobfabric/internal/api"
)

// Pools lists the server pools the token may see: every pool for an admin
// or a platform runtime, the pools its own live jobs name for a tenant's.
func (c *Client) Pools(ctx context.Context) ([]api.Pool, error) {
	var out []api.Pool
	return out, c.Do(ctx, "GET", "/v1/pools", nil, &out)
}

// SetPool makes pool name the given servers (admin or platform runtime
// token); it answers the pool as it is now.
func (c *Client) SetPool(ctx context.Context, name string, servers []string) (*api.Pool, error) {
	var out api.Pool
	return &out, c.Do(ctx, "PUT", "/v1/pools/"+url.PathEscape(name), api.PoolSetRequest{Servers: servers}, &out)
}

// DeletePool deletes pool name (admin or platform runtime token); it
// answers the pool as it was.
func (c *Client) DeletePool(ctx context.Context, name string) (*api.Pool, error) {
	var out api.Pool
	return &out, c.Do(ctx, "DELETE", "/v1/pools/"+url.PathEscape(name), nil, &out)
}
