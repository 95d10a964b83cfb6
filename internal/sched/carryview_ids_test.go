package sched

import (
	"reflect"
	"testing"
)

// TestCarryViewListsHoldNoPointer: the carried view's lists (an entry a
// placement, 100,000 at issue 18's scale) must not be scanned by every
// collection, which marked them beside the cycles after a fill.
func TestCarryViewListsHoldNoPointer(t *testing.T) {
	if hasPointers(reflect.TypeFor[onRef]()) {
		t.Fatal("onRef holds a pointer: the collector scans every entry of the carried view's lists")
	}
}

// TestPatchChangesHoldNoPointer: the patch's changes, an array a Carry
// keeps for the most a patch takes (50,000 at 100,000 jobs), must not be
// scanned by every collection.
func TestPatchChangesHoldNoPointer(t *testing.T) {
	if hasPointers(reflect.TypeFor[carryChange]()) {
		t.Fatal("carryChange holds a pointer: the collector scans the Carry's array of changes")
	}
}
