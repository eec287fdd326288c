// The checker itself must be able to fail: a linearizable history passes, a stale read and a
// lost delete do not, indeterminate writes may count either way, definite failures never.
package main

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func check(t *testing.T, history string) porcupine.CheckResult {
	t.Helper()
	perKey, _, _, err := readHistory(strings.NewReader(history))
	if err != nil {
		t.Fatal(err)
	}
	worst := porcupine.Ok
	for _, ops := range perKey {
		if r := porcupine.CheckOperationsTimeout(registerModel, ops, 10*time.Second); r != porcupine.Ok {
			worst = r
		}
	}
	return worst
}

func TestConcurrentPutsAndReadsAreLinearizable(t *testing.T) {
	// Client 1 puts a then b; client 2's get overlaps the second put and may see either.
	h := `{"id":1,"client":1,"kind":"put","invoke_us":0,"complete_us":10,"outcome":"ok","key":"r0","value":"a"}
{"id":2,"client":1,"kind":"put","invoke_us":20,"complete_us":40,"outcome":"ok","key":"r0","value":"b"}
{"id":3,"client":2,"kind":"get","invoke_us":25,"complete_us":30,"outcome":"ok","key":"r0","value":"a"}
{"id":4,"client":2,"kind":"get","invoke_us":50,"complete_us":60,"outcome":"ok","key":"r0","value":"b"}
{"id":5,"client":2,"kind":"delete","invoke_us":70,"complete_us":80,"outcome":"ok","key":"r0","value":"b"}
{"id":6,"client":1,"kind":"get","invoke_us":90,"complete_us":95,"outcome":"ok","key":"r0"}
{"id":7,"client":1,"kind":"get","invoke_us":0,"complete_us":5,"outcome":"ok","key":"r1"}`
	if r := check(t, h); r != porcupine.Ok {
		t.Fatalf("want Ok, got %s", r)
	}
}

func TestAStaleReadIsNotLinearizable(t *testing.T) {
	// The put of b completed before the get began, yet the get returned a.
	h := `{"id":1,"client":1,"kind":"put","invoke_us":0,"complete_us":10,"outcome":"ok","key":"r0","value":"a"}
{"id":2,"client":1,"kind":"put","invoke_us":20,"complete_us":30,"outcome":"ok","key":"r0","value":"b"}
{"id":3,"client":2,"kind":"get","invoke_us":40,"complete_us":50,"outcome":"ok","key":"r0","value":"a"}`
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("want Illegal, got %s", r)
	}
}

func TestAValueBackAfterItsDeleteIsNotLinearizable(t *testing.T) {
	h := `{"id":1,"client":1,"kind":"put","invoke_us":0,"complete_us":10,"outcome":"ok","key":"r2","value":"a"}
{"id":2,"client":1,"kind":"delete","invoke_us":20,"complete_us":30,"outcome":"ok","key":"r2","value":"a"}
{"id":3,"client":2,"kind":"get","invoke_us":40,"complete_us":50,"outcome":"ok","key":"r2","value":"a"}`
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("want Illegal, got %s", r)
	}
}

func TestIndeterminateWritesMayApplyLateAndFailuresNever(t *testing.T) {
	// An indeterminate put may apply long after it was sent: a later read of it is fine.
	late := `{"id":1,"client":1,"kind":"put","invoke_us":0,"complete_us":10,"outcome":"indeterminate","key":"r0","value":"x"}
{"id":2,"client":2,"kind":"get","invoke_us":20,"complete_us":30,"outcome":"ok","key":"r0"}
{"id":3,"client":2,"kind":"get","invoke_us":40,"complete_us":50,"outcome":"ok","key":"r0","value":"x"}`
	if r := check(t, late); r != porcupine.Ok {
		t.Fatalf("indeterminate put: want Ok, got %s", r)
	}
	// A definitely failed put must never be read.
	failed := `{"id":1,"client":1,"kind":"put","invoke_us":0,"complete_us":10,"outcome":"fail","key":"r0","value":"x"}
{"id":2,"client":2,"kind":"get","invoke_us":20,"complete_us":30,"outcome":"ok","key":"r0","value":"x"}`
	if r := check(t, failed); r != porcupine.Illegal {
		t.Fatalf("failed put read back: want Illegal, got %s", r)
	}
}

func TestAnUnreadIndeterminatePutIsLeftOutWithoutHidingAViolation(t *testing.T) {
	// The put of y is indeterminate and nobody read y: it is left out. The stale read of a after
	// the put of b completed stays a violation.
	h := `{"id":1,"client":1,"kind":"put","invoke_us":0,"complete_us":10,"outcome":"ok","key":"r0","value":"a"}
{"id":2,"client":1,"kind":"put","invoke_us":20,"complete_us":30,"outcome":"ok","key":"r0","value":"b"}
{"id":3,"client":1,"kind":"put","invoke_us":35,"complete_us":38,"outcome":"indeterminate","key":"r0","value":"y"}
{"id":4,"client":2,"kind":"get","invoke_us":40,"complete_us":50,"outcome":"ok","key":"r0","value":"a"}`
	perKey, total, unseen, err := readHistory(strings.NewReader(h))
	if err != nil {
		t.Fatal(err)
	}
	if unseen != 1 || total != 3 || len(perKey["r0"]) != 3 {
		t.Fatalf("want the put of y left out (1 of 4), got unseen %d, total %d", unseen, total)
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("want Illegal, got %s", r)
	}
	// Read back, the same indeterminate put is kept: the get of y is then explained by it.
	read := h[:strings.LastIndex(h, "\n")] +
		`
{"id":5,"client":2,"kind":"get","invoke_us":60,"complete_us":70,"outcome":"ok","key":"r0","value":"y"}`
	if _, total, unseen, _ := readHistory(strings.NewReader(read)); unseen != 0 || total != 4 {
		t.Fatalf("want the read-back put kept, got unseen %d, total %d", unseen, total)
	}
	if r := check(t, read); r != porcupine.Ok {
		t.Fatalf("want Ok, got %s", r)
	}
}

func TestAMalformedLineIsAnError(t *testing.T) {
	if _, _, _, err := readHistory(strings.NewReader("{\"kind\":\"put\",")); err == nil {
		t.Fatal("want an error")
	}
}
