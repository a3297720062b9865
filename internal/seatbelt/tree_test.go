package seatbelt

import (
	"slices"
	"testing"
)

func TestDoomed(t *testing.T) {
	const leader = 100
	procs := []Proc{
		{1, 0, 1},            // launchd
		{50, 1, 50},          // the launcher
		{leader, 50, leader}, // the command, its own session and group
		{101, leader, leader},
		{102, 101, leader},
		{103, 102, 103},  // setsid()ed, parent alive: found by its chain
		{104, 103, 104},  // and its child
		{200, 1, 200},    // setsid()ed and double-forked: orphaned to launchd, lost
		{201, 1, leader}, // orphaned but still in the group: found by pgid
		{300, 50, 300},   // a sibling of the command's: never
		{400, 401, 400},  // a cycle in a racy snapshot
		{401, 400, 400},  //
		{500, 9999, 500}, // a parent missing from the snapshot
	}
	got := Doomed(procs, leader)
	slices.Sort(got)
	want := []int{101, 102, 103, 104, 201}
	if !slices.Equal(got, want) {
		t.Fatalf("Doomed = %v, want %v", got, want)
	}
}
