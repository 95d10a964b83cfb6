package slurm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Reservations: a node a released job stayed pending for though Slurm
// showed it usable is cordoned (a suspect, nodes.go). The usual cause is
// a reservation (maintenance, or one the job's time limit runs into),
// which sinfo does not show in the node's state. When such a reservation
// holds the node, the cordon lasts as long as it does and ends when it
// ends (or is deleted, or leaves the node); otherwise for the fixed
// suspectFor x StuckAfter. scontrol show reservation is read at most once
// a pass, and only in passes with a job stuck past StuckAfter or a
// suspect held by a reservation: a quiet cluster never reads it.

// Reservation is one of slurmctld's reservations, as scontrol show
// reservation -o prints it.
type Reservation struct {
	Name       string
	Start, End time.Time
	Nodes      []string
	// State is ACTIVE or INACTIVE (not started yet).
	State string
}

// showReservationArgs: one line per reservation.
var showReservationArgs = []string{"show", "reservation", "-o"}

// ParseReservations reads scontrol show reservation -o. Slurm prints
// times in the local time of the commands' host (the controller's, where
// the bridge runs), without a zone: they are read in loc. A reservation
// without nodes (licenses only) has none.
func ParseReservations(out string, loc *time.Location) ([]Reservation, error) {
	var rs []Reservation
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No reservations") {
			continue
		}
		f := ParseShowJob(line)
		r := Reservation{Name: f["ReservationName"], State: f["State"]}
		if r.Name == "" {
			return nil, fmt.Errorf("scontrol show reservation line %d %q: no ReservationName", n+1, line)
		}
		var err error
		for _, t := range []struct {
			key string
			to  *time.Time
		}{{"StartTime", &r.Start}, {"EndTime", &r.End}} {
			if *t.to, err = time.ParseInLocation("2006-01-02T15:04:05", f[t.key], loc); err != nil {
				return nil, fmt.Errorf("reservation %s: %s %q: %w", r.Name, t.key, f[t.key], err)
			}
		}
		if nodes := nullable(f["Nodes"]); nodes != "" {
			if r.Nodes, err = ExpandHostlist(nodes); err != nil {
				return nil, fmt.Errorf("reservation %s: %w", r.Name, err)
			}
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// reservations are slurmctld's reservations, read once a pass; ok false
// when scontrol could not be read (this pass decides nothing from them).
func (b *Bridge) reservations(ctx context.Context, p *pass) (rs []Reservation, ok bool) {
	if !p.resvRead {
		p.resvRead = true
		out, err := b.cfg.Slurm.Command(ctx, "scontrol", showReservationArgs...)
		if err == nil {
			p.resv, err = ParseReservations(string(out), time.Local)
		}
		if err != nil {
			b.cfg.Logger.Warn("slurm bridge: read the reservations (scontrol show reservation); the cordons they hold keep their last end", "err", err)
		}
		p.resvOK = err == nil
	}
	return p.resv, p.resvOK
}

// holding are the reservations that keep a job from starting on node:
// active now, or starting before a job of that time limit would end (0:
// no limit). end is when the last of them ends.
func holding(rs []Reservation, node string, now time.Time, limit time.Duration) (names []string, end time.Time) {
	for _, r := range rs {
		if !slices.Contains(r.Nodes, node) || !r.End.After(now) {
			continue
		}
		if r.State != "ACTIVE" && limit > 0 && !r.Start.Before(now.Add(limit)) {
			continue // starts after the job would have ended
		}
		names = append(names, r.Name)
		if r.End.After(end) {
			end = r.End
		}
	}
	return names, end
}

// followReservations ends the cordons of suspects held by reservations
// that ended, were deleted or left the node, and moves their end to the
// reservations' own (Slurm may extend one). Without a reservation read
// this pass, each keeps the last end read.
func (b *Bridge) followReservations(ctx context.Context, p *pass) {
	held := false
	for _, s := range b.suspect {
		held = held || len(s.resv) > 0
	}
	if !held {
		return
	}
	rs, ok := b.reservations(ctx, p)
	if !ok {
		return
	}
	now := b.cfg.Clock.Now()
	for n, s := range b.suspect {
		if len(s.resv) == 0 {
			continue
		}
		var still []Reservation
		for _, r := range rs {
			if slices.Contains(s.resv, r.Name) {
				still = append(still, r)
			}
		}
		names, end := holding(still, n, now, 0)
		if len(names) == 0 {
			delete(b.suspect, n)
			b.cfg.Logger.Info("slurm bridge: the reservation a job stayed pending for ended; the node's cordon ends", "node", n, "reservations", strings.Join(s.resv, ","))
			continue
		}
		s.resv, s.until = names, end
		b.suspect[n] = s
	}
}
