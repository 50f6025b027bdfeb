// Tests of parsing /proc/<pid>/stat and status.

package measure

import "testing"

func TestParseStatCPU(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    uint64
		wantErr bool
	}{
		"plain": {
			in:   "1234 (etcd) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 75 0 0 20 0 12 0 100 1000000 2000 18446744073709551615",
			want: 325,
		},
		"command with spaces and parentheses": {
			in:   "1 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1",
			want: 10,
		},
		"truncated": {in: "1 (x) S 1 1", wantErr: true},
		"no name":   {in: "garbage", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ticks = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestParseStatusMemory(t *testing.T) {
	in := "Name:\tflotilla-node\nVmPeak:\t 1000 kB\nVmHWM:\t   81920 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   10240 kB\nRssFile:\t   30720 kB\nThreads:\t12\n"
	rss, hwm, file, err := parseStatusMemory([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if rss != 40<<20 || hwm != 80<<20 || file != 30<<20 {
		t.Errorf("rss, hwm, file = %d, %d, %d; want %d, %d, %d", rss, hwm, file, 40<<20, 80<<20, 30<<20)
	}
	if _, _, file, err := parseStatusMemory([]byte("VmHWM:\t 1 kB\nVmRSS:\t 1 kB\n")); err != nil || file != 0 {
		t.Errorf("without RssFile: file %d, %v; want 0 and no error", file, err)
	}
	if _, _, _, err := parseStatusMemory([]byte("Name:\tx\n")); err == nil {
		t.Error("want an error when VmRSS is missing")
	}
}
