package quorum

import "testing"

func TestCount(t *testing.T) {
	tests := []struct {
		name        string
		count       Count
		wantReached bool
		wantShort   int
		wantSurplus int
	}{
		{name: "nothing placed", count: Count{MinMember: 3}, wantShort: 3},
		{name: "placed short of the quorum", count: Count{MinMember: 3, Placed: 2}, wantShort: 1},
		{name: "exactly the quorum placed: no surplus", count: Count{MinMember: 3, Placed: 3}, wantReached: true},
		{name: "placed beyond the quorum", count: Count{MinMember: 3, Placed: 5}, wantReached: true, wantSurplus: 2},
		{name: "succeeded members complete the quorum", count: Count{MinMember: 8, Placed: 6, Succeeded: 2}, wantReached: true},
		{name: "succeeded members make placed ones surplus", count: Count{MinMember: 8, Placed: 8, Succeeded: 2}, wantReached: true, wantSurplus: 2},
		{name: "surplus is never more than is placed", count: Count{MinMember: 2, Placed: 1, Succeeded: 5}, wantReached: true, wantSurplus: 1},
		{name: "all succeeded: nothing to evict", count: Count{MinMember: 2, Succeeded: 2}, wantReached: true},
		{name: "no minMember (no PodGroup) is never reached", count: Count{Placed: 3}, wantSurplus: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.count.Reached(); got != tt.wantReached {
				t.Errorf("Reached() = %v, want %v", got, tt.wantReached)
			}
			if got := tt.count.Short(); got != tt.wantShort {
				t.Errorf("Short() = %d, want %d", got, tt.wantShort)
			}
			if got := tt.count.Surplus(); got != tt.wantSurplus {
				t.Errorf("Surplus() = %d, want %d", got, tt.wantSurplus)
			}
		})
	}
}
