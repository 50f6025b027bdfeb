package flotillanode

import "testing"

func TestWorkersPerNode(t *testing.T) {
	cases := map[string]struct{ total, nodes, want int }{
		"a whole cluster keeps them all": {32, 1, 32},
		"two partitions share them":      {32, 2, 16},
		"an uneven share rounds up":      {16, 3, 6},
		"fifty partitions get the floor": {32, 50, minWorkersPerNode},
		"a budget below the floor":       {1, 50, 1},
		"no virtual nodes counts as one": {8, 0, 8},
	}
	for name, tc := range cases {
		if got := workersPerNode(tc.total, tc.nodes); got != tc.want {
			t.Errorf("%s: workersPerNode(%d, %d) = %d, want %d", name, tc.total, tc.nodes, got, tc.want)
		}
	}
}
