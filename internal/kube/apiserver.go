package kube

import (
	"context"
	"math/rand/v2"
	"time"
)

// Why the bridge follows kube-apiserver itself: client-go's reflectors
// retry a refused list or watch after 0.8s, doubling up to 30s, each wait
// jittered up to twice as long, and cannot be told to try sooner
// (ReflectorOptions.Backoff is not reachable through a shared informer
// factory). After an outage of a minute their next try came up to a
// minute after the server was back, and the bridge acted on nothing new
// until then. So the bridge asks /readyz itself, backs off boundedly while
// it fails, and when it answers again starts new informers, which list at
// once (a relist, as the old ones would have done, only sooner).

// Bounds of the wait between probes while kube-apiserver does not answer:
// from apiFirstRetry, doubling up to apiMaxRetry, each jittered.
const (
	apiFirstRetry = 250 * time.Millisecond
	apiMaxRetry   = 2 * time.Second
	// apiJitter: each wait is its bound times a factor in
	// [1-apiJitter, 1], so many bridges (or restarts) do not probe in step
	// and no wait exceeds apiMaxRetry.
	apiJitter = 0.5
	// apiProbeTimeout bounds one probe: a server that does not answer
	// (a partition rather than a refused connection) is down too.
	apiProbeTimeout = 5 * time.Second
)

// apiRetry is the wait before the probe after failed ones (1, 2, ...),
// given r in [0, 1): bounded by apiMaxRetry, jittered down by up to
// apiJitter of the bound.
func apiRetry(failed int, r float64) time.Duration {
	d := apiFirstRetry
	for i := 1; i < failed && d < apiMaxRetry; i++ {
		d *= 2
	}
	d = min(d, apiMaxRetry)
	return d - time.Duration(float64(d)*apiJitter*r)
}

// followAPIServer probes kube-apiserver every Interval while it answers,
// and after apiRetry's waits while it does not; it sends on back each time
// it answers again after failing, until ctx ends.
func (b *Bridge) followAPIServer(ctx context.Context, probe func(context.Context) error, back chan<- struct{}) {
	failed := 0
	var since time.Time
	t, fire := b.cfg.Clock.NewTimer(b.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-fire:
		}
		pctx, cancel := context.WithTimeout(ctx, apiProbeTimeout)
		err := probe(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if failed == 0 {
				since = b.cfg.Clock.Now()
				b.cfg.Logger.Warn("kube bridge: kube-apiserver does not answer; the bridge acts again once it does", "err", err)
			}
			failed++
			t.Reset(apiRetry(failed, rand.Float64()))
			continue
		case failed > 0:
			b.cfg.Logger.Info("kube bridge: kube-apiserver answers again; watching anew", "down", b.cfg.Clock.Now().Sub(since).Round(time.Millisecond), "probes", failed)
			failed = 0
			select {
			case back <- struct{}{}:
			default: // a restart is pending already
			}
		}
		t.Reset(b.cfg.Interval)
	}
}

// readyz asks kube-apiserver whether it serves (/readyz: it is up and
// reaches etcd). Any client may ask (system:public-info-viewer).
func (b *Bridge) readyz(ctx context.Context) error {
	return b.cfg.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}
