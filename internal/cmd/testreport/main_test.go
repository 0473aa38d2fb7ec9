package main

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	const pass = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Elapsed":0.5}
`
	const skip = `{"Action":"output","Package":"q","Test":"TestS","Output":"    s_test.go:9: TOLLGATE_TEST_REDIS is not set\n"}
{"Action":"skip","Package":"q","Test":"TestS"}
{"Action":"pass","Package":"q","Elapsed":0.1}
`
	const fail = `{"Action":"output","Package":"r","Test":"TestF","Output":"    f_test.go:3: got 1, want 2\n"}
{"Action":"fail","Package":"r","Test":"TestF"}
{"Action":"fail","Package":"r","Elapsed":0.2}
`
	const timeout = `{"Action":"run","Package":"s","Test":"TestSlow"}
{"Action":"output","Package":"s","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"s","Output":"panic: test timed out after 30m0s\n"}
{"Action":"output","Package":"s","Output":"\trunning tests:\n\t\tTestSlow (29m59s)\n"}
{"Action":"fail","Package":"s","Elapsed":1800.2}
`
	const buildFail = `{"ImportPath":"b","Action":"build-output","Output":"b.go:1: syntax error\n"}
{"ImportPath":"b","Action":"build-fail"}
`
	tests := []struct {
		name    string
		in      string
		ci      bool
		bad     bool
		mention string
	}{
		{"PassOutsideCI", pass, false, false, "ok   p"},
		{"Counts", pass + skip + fail, false, true, "1 passed, 1 failed, 1 skipped\n"},
		{"PassInCI", pass, true, false, "ok   p"},
		{"SkipOutsideCI", pass + skip, false, false, "TOLLGATE_TEST_REDIS is not set"},
		{"SkipInCI", pass + skip, true, true, "every test must run"},
		{"Fail", pass + fail, false, true, "got 1, want 2"},
		{"BuildFail", buildFail, false, true, "syntax error"},
		{"Timeout", pass + timeout, false, true, "TestSlow (29m59s)"},
		{"TimeoutCounts", pass + timeout, false, true, "1 passed, 1 failed, 0 skipped\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			bad, err := report(strings.NewReader(tt.in), &out, tt.ci)
			if err != nil {
				t.Fatal(err)
			}
			if bad != tt.bad {
				t.Errorf("bad = %v, want %v\n%s", bad, tt.bad, out.String())
			}
			if !strings.HasSuffix(out.String(), " skipped\n") {
				t.Errorf("report does not end with the counts:\n%s", out.String())
			}
			if !strings.Contains(out.String(), tt.mention) {
				t.Errorf("report does not mention %q:\n%s", tt.mention, out.String())
			}
		})
	}
}
