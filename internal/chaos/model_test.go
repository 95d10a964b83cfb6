package chaos

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// op builds one history entry: client, call and return times, input, output.
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

func submitted(id uint64) Output { return Output{ID: id, State: domain.JobPending} }

func seen(id uint64, s domain.JobState) Output { return Output{ID: id, State: s} }

var (
	unknown  = Output{Unknown: true}
	notFound = Output{Code: domain.CodeNotFound}
)

// TestModel: hand-made histories the model must accept, and the
// non-linearizable ones (each a bug the chaos test exists to catch) it must
// reject.
func TestModel(t *testing.T) {
	sub := func(key string) Input { return Input{Kind: Submit, Key: key} }
	get := func(id uint64) Input { return Input{Kind: Get, ID: id} }
	cancel := func(id uint64) Input { return Input{Kind: Cancel, ID: id} }
	list := Input{Kind: List}
	tests := map[string]struct {
		history []porcupine.Operation
		ok      bool
	}{
		"sequential submit, read, cancel, read": {ok: true, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 3, get(1), seen(1, domain.JobReady)),
			op(0, 4, 5, cancel(1), seen(1, domain.JobCancelled)),
			op(0, 6, 7, get(1), seen(1, domain.JobCancelled)),
			op(0, 8, 9, cancel(1), Output{Code: domain.CodeFailedPrecondition}),
			op(0, 10, 11, list, Output{Jobs: []JobView{{1, domain.JobCancelled}}}),
		}},
		"concurrent submits take IDs in either order": {ok: true, history: []porcupine.Operation{
			op(0, 0, 10, sub("a"), submitted(2)),
			op(1, 1, 9, sub("b"), submitted(1)),
		}},
		"a retried submit returns the first attempt's job": {ok: true, history: []porcupine.Operation{
			op(0, 0, never, sub("a"), unknown),
			op(0, 5, 6, sub("a"), seen(1, domain.JobReady)),
			op(1, 7, 8, sub("b"), submitted(2)),
		}},
		"an unanswered submit that never applied": {ok: true, history: []porcupine.Operation{
			op(0, 0, never, sub("a"), unknown),
			op(1, 1, 2, sub("b"), submitted(1)),
			op(1, 3, 4, list, Output{Jobs: []JobView{{1, domain.JobPending}}}),
		}},
		"an unanswered submit that applied shows up in a later list": {ok: true, history: []porcupine.Operation{
			op(0, 0, never, sub("a"), unknown),
			op(1, 5, 6, list, Output{Jobs: []JobView{{1, domain.JobPending}}}),
			op(1, 7, 8, sub("b"), submitted(2)),
		}},
		"a read concurrent with a cancel may see either": {ok: true, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 10, cancel(1), seen(1, domain.JobCancelled)),
			op(1, 3, 4, get(1), seen(1, domain.JobPending)),
			op(1, 5, 6, get(1), seen(1, domain.JobCancelled)),
		}},
		"an unanswered cancel may apply late": {ok: true, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, never, cancel(1), unknown),
			op(1, 3, 4, get(1), seen(1, domain.JobReady)),
			op(1, 5, 6, get(1), seen(1, domain.JobCancelled)),
		}},

		// Rejected: each is a real bug.
		"stale read: an acknowledged job is not found": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(1, 2, 3, get(1), notFound),
		}},
		"stale read: a job acknowledged cancelled reads as running": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 3, cancel(1), seen(1, domain.JobCancelled)),
			op(1, 4, 5, get(1), seen(1, domain.JobReady)),
		}},
		"a state moves backwards": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 3, get(1), seen(1, domain.JobReady)),
			op(1, 4, 5, get(1), seen(1, domain.JobPending)),
		}},
		"a retried submit makes a second job": {ok: false, history: []porcupine.Operation{
			op(0, 0, never, sub("a"), unknown),
			op(0, 5, 6, sub("a"), submitted(2)),
		}},
		"two keys, one job": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(1, 2, 3, sub("b"), submitted(1)),
		}},
		"IDs out of real-time order": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(2)),
			op(1, 2, 3, sub("b"), submitted(1)),
		}},
		"a job cancelled by nobody": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(1, 2, 3, get(1), seen(1, domain.JobCancelled)),
		}},
		"unavailable, yet the cancel applied": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 3, cancel(1), Output{Code: domain.CodeUnavailable}),
			op(1, 4, 5, get(1), seen(1, domain.JobCancelled)),
		}},
		"a list misses an acknowledged job": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 3, sub("b"), submitted(2)),
			op(1, 4, 5, list, Output{Jobs: []JobView{{1, domain.JobPending}}}),
		}},
		"a cancelled job cancelled again": {ok: false, history: []porcupine.Operation{
			op(0, 0, 1, sub("a"), submitted(1)),
			op(0, 2, 3, cancel(1), seen(1, domain.JobCancelled)),
			op(1, 4, 5, cancel(1), seen(1, domain.JobCancelled)),
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := porcupine.CheckOperationsTimeout(Model, tc.history, 0)
			if got := res == porcupine.Ok; got != tc.ok {
				t.Errorf("linearizable = %v (%s), want %v", got, res, tc.ok)
			}
		})
	}
}
