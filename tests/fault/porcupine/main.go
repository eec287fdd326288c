// porcupine-check: the cache linearizability check of a fault run (issue 17, cluster-etcd.md
// §6 rule 7). It reads a run's history.jsonl (tests/fault/history.h), keeps the cache
// operations (put, get, delete) and asks Porcupine whether each key's history is linearizable
// against a register model: a key holds one value or nothing; put sets it, delete clears it and
// returns what it held, get returns it.
//
// Outcomes map onto Porcupine's model the usual way for histories with unknown outcomes:
//   - ok: the operation took effect between its invoke and complete times, with that output;
//   - fail (a definite refusal): it never took effect, so it is left out;
//   - indeterminate: a put or delete may have taken effect at any time after its invocation,
//     so it gets an open end and an output the model accepts whatever it was; an indeterminate
//     get changed nothing and is left out.
//   - an indeterminate put whose value no get or delete ever returned is left out as well: with
//     an open end it can always be placed after every other operation, where it changes nothing
//     anyone saw, so a key's history is linearizable with it exactly when it is without it.
//     Open-ended operations are what makes Porcupine's search grow (each may sit anywhere after
//     its invocation), and a fault that refuses writes leaves dozens of them unobserved per key.
//
// Usage: porcupine-check [-timeout 60s] [-html DIR] history.jsonl
// Prints one line per key and a summary; exit 0 when every key is linearizable, 1 when one is
// not (the key and, with -html, a visualisation of it are named), 2 when the check could not be
// decided in time or the history could not be read.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// One line of history.jsonl; only the fields the cache check needs.
type historyOp struct {
	ID         uint64  `json:"id"`
	Client     int     `json:"client"`
	Kind       string  `json:"kind"`
	InvokeUs   int64   `json:"invoke_us"`
	CompleteUs int64   `json:"complete_us"`
	Outcome    string  `json:"outcome"`
	Key        string  `json:"key"`
	Value      *string `json:"value"` // put: written; get/delete ok: returned (absent: none)
}

type input struct {
	kind  string // "put", "get", "delete"
	value string // put: the value written
}

type output struct {
	unknown bool   // indeterminate: any output is possible
	found   bool   // get/delete: the key held a value
	value   string // get/delete: that value
}

// register is the state of one key: nothing, or one value.
type register struct {
	set   bool
	value string
}

var registerModel = porcupine.Model{
	Init: func() interface{} { return register{} },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		st := state.(register)
		i := in.(input)
		o := out.(output)
		matches := o.unknown || (o.found == st.set && (!o.found || o.value == st.value))
		switch i.kind {
		case "put":
			return true, register{set: true, value: i.value}
		case "delete":
			return matches, register{}
		default: // get
			return matches, st
		}
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		o := out.(output)
		result := "?"
		if !o.unknown {
			result = "none"
			if o.found {
				result = fmt.Sprintf("%q", o.value)
			}
		}
		if i.kind == "put" {
			return fmt.Sprintf("put(%q)", i.value)
		}
		return fmt.Sprintf("%s() -> %s", i.kind, result)
	},
	DescribeState: func(state interface{}) string {
		st := state.(register)
		if !st.set {
			return "none"
		}
		return fmt.Sprintf("%q", st.value)
	},
}

// cacheOp is one cache operation of the history and its line number.
type cacheOp struct {
	line int
	op   historyOp
}

// readCacheOps returns the history's cache operations (put, get, delete) in file order.
func readCacheOps(r io.Reader) ([]cacheOp, error) {
	var ops []cacheOp
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for line := 1; scanner.Scan(); line++ {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var op historyOp
		if err := json.Unmarshal(scanner.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		if op.Kind != "put" && op.Kind != "get" && op.Kind != "delete" {
			continue
		}
		if op.Key == "" {
			return nil, fmt.Errorf("line %d: a %s without a key", line, op.Kind)
		}
		ops = append(ops, cacheOp{line, op})
	}
	return ops, scanner.Err()
}

// readHistory returns the cache operations of the history, per key, in Porcupine's terms, and
// how many indeterminate puts it left out because nobody saw their value.
func readHistory(r io.Reader) (map[string][]porcupine.Operation, int, int, error) {
	ops, err := readCacheOps(r)
	if err != nil {
		return nil, 0, 0, err
	}
	// The values each key was seen to hold: returned by a get or a delete that completed.
	seen := map[string]map[string]bool{}
	for _, c := range ops {
		if c.op.Outcome == "ok" && c.op.Kind != "put" && c.op.Value != nil {
			if seen[c.op.Key] == nil {
				seen[c.op.Key] = map[string]bool{}
			}
			seen[c.op.Key][*c.op.Value] = true
		}
	}
	perKey := map[string][]porcupine.Operation{}
	total, unseen := 0, 0
	for _, c := range ops {
		line, op := c.line, c.op
		var in input
		var out output
		in.kind = op.Kind
		ret := op.CompleteUs
		switch op.Outcome {
		case "ok":
			if op.Kind == "put" {
				if op.Value == nil {
					return nil, 0, 0, fmt.Errorf("line %d: a put without a value", line)
				}
				in.value = *op.Value
			} else if op.Value != nil {
				out.found = true
				out.value = *op.Value
			}
		case "fail":
			continue // definitely not applied
		case "indeterminate":
			if op.Kind == "get" {
				continue // a read that changed nothing
			}
			if op.Kind == "put" && (op.Value == nil || !seen[op.Key][*op.Value]) {
				unseen++
				continue // placeable after everything: see the comment at the top
			}
			if op.Value != nil {
				in.value = *op.Value
			}
			out.unknown = true
			ret = math.MaxInt64 // may take effect at any later time
		default:
			return nil, 0, 0, fmt.Errorf("line %d: unknown outcome %q", line, op.Outcome)
		}
		perKey[op.Key] = append(perKey[op.Key], porcupine.Operation{
			ClientId: op.Client, Input: in, Call: op.InvokeUs, Output: out, Return: ret,
		})
		total++
	}
	return perKey, total, unseen, nil
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "give up (exit 2) after this long per key")
	html := flag.String("html", "", "write a visualisation of each non-linearizable key here")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: porcupine-check [-timeout 60s] [-html DIR] history.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "porcupine-check:", err)
		os.Exit(2)
	}
	perKey, total, unseen, err := readHistory(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "porcupine-check:", err)
		os.Exit(2)
	}
	if unseen > 0 {
		fmt.Printf("left out: %d indeterminate puts whose value nobody read\n", unseen)
	}
	keys := make([]string, 0, len(perKey))
	for k := range perKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	illegal, unknown := 0, 0
	for _, key := range keys {
		result, info := porcupine.CheckOperationsVerbose(registerModel, perKey[key], *timeout)
		fmt.Printf("key %s: %d ops: %s\n", key, len(perKey[key]), result)
		switch result {
		case porcupine.Illegal:
			illegal++
			if *html != "" {
				path := filepath.Join(*html, "porcupine-"+key+".html")
				if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
					fmt.Printf("key %s: visualisation in %s\n", key, path)
				}
			}
		case porcupine.Unknown:
			unknown++
		}
	}
	switch {
	case illegal > 0:
		fmt.Printf("cache NOT LINEARIZABLE: %d of %d keys (%d ops)\n", illegal, len(keys), total)
		os.Exit(1)
	case unknown > 0:
		fmt.Printf("cache UNDECIDED: %d of %d keys timed out (%d ops)\n", unknown, len(keys), total)
		os.Exit(2)
	}
	fmt.Printf("cache linearizable: %d keys, %d ops\n", len(keys), total)
}
